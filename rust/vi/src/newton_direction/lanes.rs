//! The right-hand-side sweeps of the Newton direction for `LANES` right-hand sides at once (the columns of the
//! linearisation), carrying the momentum row, and the DEL Jacobian–vector product
//! `J δz` on `LANES` variations.

use super::{joint_force_derivative, sized, NewtonFactorization, M6, V6};
use crate::del::JointForces;
use crate::scheme::Scheme;
use vidyn_rbd::Model;

/// Number of right-hand sides processed together by the lane (batched) sweeps.
pub(crate) const LANES: usize = 8;
/// One scalar per right-hand side.
pub(crate) type Lanes = [f64; LANES];
/// One 6-vector per right-hand side, `[component][lane]`.
type L6 = [Lanes; 6];

const ZERO_LANES: Lanes = [0.0; LANES];
const ZERO_L6: L6 = [ZERO_LANES; 6];

/// `v · a` lane-wise.
#[inline(always)]
fn dot_l6(v: &V6, a: &L6) -> Lanes {
    let mut r = ZERO_LANES;
    for k in 0..6 {
        let vk = v[k];
        for c in 0..LANES {
            r[c] += vk * a[k][c];
        }
    }
    r
}

/// `a += v ⊗ t` (`a[k][c] += v[k] t[c]`).
#[inline(always)]
fn axpy_l6(a: &mut L6, v: &V6, t: &Lanes) {
    for k in 0..6 {
        let vk = v[k];
        for c in 0..LANES {
            a[k][c] += vk * t[c];
        }
    }
}

#[inline(always)]
fn add_l6(a: &mut L6, b: &L6) {
    for k in 0..6 {
        for c in 0..LANES {
            a[k][c] += b[k][c];
        }
    }
}

/// Scratch of the lane sweeps, allocated on first use (only the linearisation needs it).
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneScratch {
    /// `l` (solve) or `δ̄μ` (JVP), `[i·P + α]`.
    a: Vec<L6>,
    /// `ζ` (solve) or `δ̄Γ` (JVP), `[i·P + ϱ]`. `a` and `b` are all zero between sweeps: a
    /// sweep clears each body's entries after their last use, so the next one accumulates the
    /// children's terms from zero without a clearing pass over the whole tree.
    b: Vec<L6>,
    eta: Vec<L6>,
    dv: Vec<L6>,
    y: Vec<Lanes>,
    xis: Vec<Lanes>,
    small: Vec<Lanes>,
    /// `ξ̄^α` of the control-point rows, `(s+1,)`.
    xi_rows: Vec<Lanes>,
    /// `Σ_x ξ̄^x` over the rows of each prescribed body, `(n,)`.
    xi_sums: Vec<Lanes>,
    dq: Vec<Lanes>,
    dots: Vec<Lanes>,
    /// `M̄_i^α` as 6×6 matrices, `[i·P + α]`.
    inertia: Vec<M6>,
}

impl NewtonFactorization {
    /// Allocates the lane scratch (once per workspace; the linearisation calls it).
    pub(crate) fn ensure_lanes(&mut self) {
        let (n, s, p) = (self.n, self.s, self.s + 1);
        let ls = &mut self.lanes;
        if ls.a.len() != n * p {
            *ls = LaneScratch {
                a: vec![ZERO_L6; n * p],
                b: vec![ZERO_L6; n * p],
                eta: vec![ZERO_L6; n * p],
                dv: vec![ZERO_L6; n * p],
                y: vec![ZERO_LANES; n * s],
                xis: vec![ZERO_LANES; n],
                small: vec![ZERO_LANES; s],
                xi_rows: vec![ZERO_LANES; p],
                xi_sums: vec![ZERO_LANES; n],
                dq: vec![ZERO_LANES; p],
                dots: vec![ZERO_LANES; p],
                inertia: vec![M6::zeros(); n * p],
            };
        }
    }

    /// [`Self::solve`] for `LANES` right-hand sides at once (same maths, vectorised over the
    /// right-hand sides): `f` `(s·n)` rows of lanes, `x` `(s·n)`, `momentum` `(n)` (needs a
    /// factorisation with the momentum row), and `prescribed_rows` `(n)`: for each prescribed
    /// body the sum over its rows `x = 0..s` (the momentum row included) of their variation
    /// `J x` (the rows the solve drops; the module docs' `δr_i^ϱ` of that body, from its own
    /// `δ̄v_i`, `η_i` once its subtree is eliminated, as the momentum row; same
    /// factorisation). Call [`Self::ensure_lanes`] first.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn solve_lanes(
        &mut self,
        model: &Model,
        sc: &Scheme,
        dt: f64,
        forces: &JointForces,
        f: &[Lanes],
        x: &mut [Lanes],
        momentum: Option<&mut [Lanes]>,
        prescribed_rows: Option<&mut [Lanes]>,
    ) {
        match self.s {
            1 => self.solve_lanes_sized::<1>(model, sc, dt, forces, f, x, momentum, prescribed_rows),
            _ => self.solve_lanes_sized::<0>(model, sc, dt, forces, f, x, momentum, prescribed_rows),
        }
    }

    /// [`Self::solve_lanes`] for `s = S` known at compile time (`S = 0`: read at run time), as
    /// [`Self::factorize_sized`].
    #[allow(clippy::too_many_arguments)]
    fn solve_lanes_sized<const S: usize>(
        &mut self,
        model: &Model,
        sc: &Scheme,
        dt: f64,
        forces: &JointForces,
        f: &[Lanes],
        x: &mut [Lanes],
        mut momentum: Option<&mut [Lanes]>,
        mut prescribed_rows: Option<&mut [Lanes]>,
    ) {
        let (n, s, rows) = (self.n, sized::<S>(self.s), self.rows);
        let p = s + 1;
        debug_assert!((momentum.is_none() && prescribed_rows.is_none()) || rows == p, "the factorisation does not carry the momentum row");
        let sums = prescribed_rows.is_some();
        let w = &sc.weights;
        let inv_dt = 1.0 / dt;
        let ls = &mut self.lanes;
        // `a`, `b` are zero on entry (module invariant: each sweep clears a body's entries once
        // it has used them), so the children's sums need no clearing pass
        for i in (0..n).rev() {
            let kp = i * p;
            // ξ̄ and y = Λ̄ (f − ξ̄)
            for beta in 0..p {
                ls.dots[beta] = dot_l6(&self.col[kp + beta], &ls.a[kp + beta]);
            }
            for r in 0..rows {
                let t1 = dot_l6(&self.rate[kp + r], &ls.a[kp + r]);
                let t2 = dot_l6(&self.col[kp + r], &ls.b[kp + r]);
                let wdt = w[r] * dt;
                let mut xi = ZERO_LANES;
                for c in 0..LANES {
                    xi[c] = wdt * t1[c] + t2[c];
                }
                for beta in 0..p {
                    let coef = w[beta] * sc.b(beta, r);
                    for c in 0..LANES {
                        xi[c] += coef * ls.dots[beta][c];
                    }
                }
                ls.xi_rows[r] = xi;
            }
            // the step-variable rows (identity for Lobatto schemes)
            let mut total = ZERO_LANES;
            for x in 0..rows {
                let mut xi = ZERO_LANES;
                for a in x..rows {
                    let m = sc.mix(x, a);
                    if m != 0.0 {
                        for c in 0..LANES {
                            xi[c] += m * ls.xi_rows[a][c];
                        }
                    }
                }
                if sums && self.prescribed[i] {
                    for c in 0..LANES {
                        total[c] += xi[c];
                    }
                }
                if x < s {
                    let fr = &f[x * n + i];
                    for c in 0..LANES {
                        ls.small[x][c] = fr[c] - xi[c];
                    }
                } else {
                    ls.xis[i] = xi;
                }
            }
            ls.xi_sums[i] = total;
            let inv = &self.inv[i * s * s..(i + 1) * s * s];
            for gm in 0..s {
                let mut v = ZERO_LANES;
                for r in 0..s {
                    let coef = inv[gm * s + r];
                    for c in 0..LANES {
                        v[c] += coef * ls.small[r][c];
                    }
                }
                ls.y[i * s + gm] = v;
            }
            if let Some(par) = model.parents[i] {
                // B.1c, B.3c (with Ĥ, Φ̂)
                let pp = par * p;
                for a in 0..p {
                    let mut acc = ls.a[kp + a];
                    for gm in 0..s {
                        axpy_l6(&mut acc, &self.h[(kp + a) * s + gm], &ls.y[i * s + gm]);
                    }
                    add_l6(&mut ls.a[pp + a], &acc);
                }
                for r in 0..rows {
                    let mut acc = ls.b[kp + r];
                    for gm in 0..s {
                        axpy_l6(&mut acc, &self.phi[(kp + r) * s + gm], &ls.y[i * s + gm]);
                    }
                    add_l6(&mut ls.b[pp + r], &acc);
                }
            }
            ls.a[kp..kp + p].fill(ZERO_L6);
            ls.b[kp..kp + p].fill(ZERO_L6);
        }
        // forward pass
        for i in 0..n {
            let kp = i * p;
            let parent = model.parents[i];
            for gm in 0..s {
                let mut v = ls.y[i * s + gm];
                if let Some(par) = parent {
                    let pp = par * p;
                    for r in 0..p {
                        let t = dot_l6(&self.x[(i * p + r) * s + gm], &ls.dv[pp + r]);
                        for c in 0..LANES {
                            v[c] += t[c];
                        }
                    }
                    for nu in 0..s {
                        let t = dot_l6(&self.y[(i * s + nu) * s + gm], &ls.eta[pp + nu + 1]);
                        for c in 0..LANES {
                            v[c] += t[c];
                        }
                    }
                }
                ls.dq[gm] = v;
                x[gm * n + i] = v;
            }
            for a in 0..p {
                let (eta_par, dv_par) = match parent {
                    Some(par) => (ls.eta[par * p + a], ls.dv[par * p + a]),
                    None => (ZERO_L6, ZERO_L6),
                };
                let mut rate_dq = ZERO_LANES;
                for gm in 1..=s {
                    let coef = sc.b(a, gm) * inv_dt;
                    for c in 0..LANES {
                        rate_dq[c] += coef * ls.dq[gm - 1][c];
                    }
                }
                let mut dv = dv_par;
                axpy_l6(&mut dv, &self.col[kp + a], &rate_dq);
                if a >= 1 {
                    let dqa = ls.dq[a - 1];
                    axpy_l6(&mut dv, &self.rate[kp + a], &dqa);
                    let mut eta = eta_par;
                    axpy_l6(&mut eta, &self.col[kp + a], &dqa);
                    ls.eta[kp + a] = eta;
                } else {
                    ls.eta[kp] = ZERO_L6;
                }
                ls.dv[kp + a] = dv;
            }
            if let Some(out) = momentum.as_deref_mut() {
                // row s, with its δQ
                let force = |gm: usize| joint_force_derivative(sc, dt, forces, i, s, gm);
                out[i] = eliminated_row(
                    ls.xis[i],
                    &self.theta_s[kp..kp + p],
                    &self.xi_s[i * s..(i + 1) * s],
                    &ls.dv[kp..kp + p],
                    &ls.eta[kp + 1..kp + p],
                    &ls.dq,
                    force,
                );
            }
            if let Some(out) = prescribed_rows.as_deref_mut().filter(|_| self.prescribed[i]) {
                // the sum of rows 0..=s, with their δQ
                let force = |gm: usize| (0..p).map(|x| joint_force_derivative(sc, dt, forces, i, x, gm)).sum::<f64>();
                out[i] = eliminated_row(
                    ls.xi_sums[i],
                    &self.theta_sum[kp..kp + p],
                    &self.xi_sum[i * s..(i + 1) * s],
                    &ls.dv[kp..kp + p],
                    &ls.eta[kp + 1..kp + p],
                    &ls.dq,
                    force,
                );
            }
        }
    }

    /// The DEL Jacobian–vector product (module docs, "Variations") for `LANES` directions at
    /// once, O(s² n) each: `dq` `((s+1)·n)` rows of lanes indexed `α·n + i` (`α = 0`
    /// included); writes the variation of every DEL row `Σ_α mix[x][α] (D_{α+1} L_d + Q^α)`
    /// (`x = 0..s`, row `s` is `p_{k+1}`) to `out` (same layout). Uses the kinematics of the last
    /// [`Self::factorize`]; call [`Self::ensure_lanes`] first.
    pub(crate) fn del_jvp_lanes(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, dq: &[Lanes], out: &mut [Lanes]) {
        match self.s {
            1 => self.del_jvp_lanes_sized::<1>(model, sc, dt, forces, dq, out),
            _ => self.del_jvp_lanes_sized::<0>(model, sc, dt, forces, dq, out),
        }
    }

    /// [`Self::del_jvp_lanes`] for `s = S` known at compile time (`S = 0`: read at run time),
    /// as [`Self::factorize_sized`].
    fn del_jvp_lanes_sized<const S: usize>(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, dq: &[Lanes], out: &mut [Lanes]) {
        let (n, p) = (self.n, sized::<S>(self.s) + 1);
        let w = &sc.weights;
        let inv_dt = 1.0 / dt;
        let g = model.gravity.linear;
        let ls = &mut self.lanes;
        for k in 0..n * p {
            ls.inertia[k] = self.inertia[k].to_matrix();
        }
        for i in 0..n {
            let kp = i * p;
            let parent = model.parents[i];
            for a in 0..p {
                let (eta_par, dv_par) = match parent {
                    Some(par) => (ls.eta[par * p + a], ls.dv[par * p + a]),
                    None => (ZERO_L6, ZERO_L6),
                };
                let dqa = dq[a * n + i];
                let mut dqdot = ZERO_LANES;
                for b in 0..p {
                    let coef = sc.b(a, b) * inv_dt;
                    for c in 0..LANES {
                        dqdot[c] += coef * dq[b * n + i][c];
                    }
                }
                let mut eta = eta_par;
                axpy_l6(&mut eta, &self.col[kp + a], &dqa);
                let mut dv = dv_par;
                axpy_l6(&mut dv, &self.rate[kp + a], &dqa);
                axpy_l6(&mut dv, &self.col[kp + a], &dqdot);
                // δ̄μ = M̄ δ̄v (body alone), δ̄Γ = P η = w Δt m [g × ω; c × (g × ω)]
                let m = &ls.inertia[kp + a];
                let mut mu = ZERO_L6;
                for r in 0..6 {
                    for k in 0..6 {
                        let mrk = m[(r, k)];
                        for c in 0..LANES {
                            mu[r][c] += mrk * dv[k][c];
                        }
                    }
                }
                let body = &self.inertia[kp + a];
                let scale = w[a] * dt * body.mass;
                let cm = body.com;
                let mut gam = ZERO_L6;
                for c in 0..LANES {
                    let (wx, wy, wz) = (eta[3][c], eta[4][c], eta[5][c]);
                    let fx = scale * (g.y * wz - g.z * wy);
                    let fy = scale * (g.z * wx - g.x * wz);
                    let fz = scale * (g.x * wy - g.y * wx);
                    gam[0][c] = fx;
                    gam[1][c] = fy;
                    gam[2][c] = fz;
                    gam[3][c] = cm.y * fz - cm.z * fy;
                    gam[4][c] = cm.z * fx - cm.x * fz;
                    gam[5][c] = cm.x * fy - cm.y * fx;
                }
                ls.eta[kp + a] = eta;
                ls.dv[kp + a] = dv;
                ls.a[kp + a] = mu;
                ls.b[kp + a] = gam;
            }
        }
        for i in (0..n).rev() {
            let kp = i * p;
            for beta in 0..p {
                ls.dots[beta] = dot_l6(&self.col[kp + beta], &ls.a[kp + beta]);
            }
            for a in 0..p {
                let wdt = w[a] * dt;
                let t1 = dot_l6(&self.ubar[kp + a], &ls.dv[kp + a]);
                let t2 = dot_l6(&self.rate[kp + a], &ls.a[kp + a]);
                let t3 = dot_l6(&self.col[kp + a], &ls.b[kp + a]);
                let mut r = ZERO_LANES;
                let mut dqdot = ZERO_LANES;
                for c in 0..LANES {
                    r[c] = wdt * (t1[c] + t2[c]) + t3[c];
                }
                for beta in 0..p {
                    let (coef, bb) = (w[beta] * sc.b(beta, a), sc.b(a, beta));
                    for c in 0..LANES {
                        r[c] += coef * ls.dots[beta][c];
                        dqdot[c] += bb * dq[beta * n + i][c];
                    }
                }
                let (dd, kk) = (w[a] * forces.damping[i], w[a] * dt * forces.stiffness[i]);
                for c in 0..LANES {
                    r[c] -= dd * dqdot[c] + kk * dq[a * n + i][c];
                }
                out[a * n + i] = r;
            }
            if let Some(par) = model.parents[i] {
                let pp = par * p;
                for a in 0..p {
                    let dqa = dq[a * n + i];
                    let mut mu = ls.a[kp + a];
                    axpy_l6(&mut mu, &self.ubar[kp + a], &dqa);
                    add_l6(&mut ls.a[pp + a], &mu);
                    let mut gam = ls.b[kp + a];
                    axpy_l6(&mut gam, &self.ebar[kp + a], &dqa);
                    add_l6(&mut ls.b[pp + a], &gam);
                }
            }
            // cleared once used, as the solve leaves them (see `solve_lanes_sized`)
            ls.a[kp..kp + p].fill(ZERO_L6);
            ls.b[kp..kp + p].fill(ZERO_L6);
        }
        if sc.mixes_rows() {
            // the step-variable rows, in place (ascending x reads unreplaced rows only)
            for x in 0..p {
                for i in 0..n {
                    let mut r = ZERO_LANES;
                    for a in x..p {
                        let m = sc.mix(x, a);
                        for c in 0..LANES {
                            r[c] += m * out[a * n + i][c];
                        }
                    }
                    out[x * n + i] = r;
                }
            }
        }
    }
}

/// A row of body `i` once its subtree is eliminated (module docs of `newton_direction`,
/// "The momentum row"): `ξ̄ + Σ_ρ Θ̄^ρ·δ̄v_i^ρ + Σ_ν Ξ̄^ν·η_i^ν − Σ_γ ∂Q/∂q^γ δq_i^γ`, with
/// `theta` `(s+1)`, `xi` `(s)`, `dv` `(s+1)` and `eta` of points `1..=s`, `dq` the body's own
/// `δq^γ` (`γ = 1..=s`) and `force(γ)` the row's `∂Q/∂q^γ`.
#[inline]
fn eliminated_row(xi_bar: Lanes, theta: &[V6], xi: &[V6], dv: &[L6], eta: &[L6], dq: &[Lanes], force: impl Fn(usize) -> f64) -> Lanes {
    let mut v = xi_bar;
    for (t, d) in theta.iter().zip(dv) {
        let t = dot_l6(t, d);
        for c in 0..LANES {
            v[c] += t[c];
        }
    }
    for (x, e) in xi.iter().zip(eta) {
        let t = dot_l6(x, e);
        for c in 0..LANES {
            v[c] += t[c];
        }
    }
    for (g, d) in dq.iter().enumerate().take(xi.len()) {
        let coef = force(g + 1);
        for c in 0..LANES {
            v[c] -= coef * d[c];
        }
    }
    v
}
