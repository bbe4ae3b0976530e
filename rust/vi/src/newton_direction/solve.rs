//! The right-hand-side sweeps of the Newton direction (module docs of the parent) with the factors of
//! [`NewtonFactorization::factorize`]: the `l, ζ, ξ̄, y` sweep (leaves to root) and the forward
//! pass (root to leaves), O(s² n) per right-hand side. One body of code serves `W` right-hand
//! sides at a time (module `lanes`): `W = 1` for a Newton direction ([`NewtonFactorization::solve`])
//! and `W = LANES` for the columns of the linearisation ([`NewtonFactorization::solve_lanes`], which
//! also returns the momentum row and the rows of the prescribed bodies). Each lane is rounded as
//! the one-lane sweep rounds it, except `δq̇` (see [`joint_rate`]).

use super::lanes::{add_l6, axpy_l6, dot_l6, Sweep, L6, LANES};
use super::{joint_force_derivative, sized, Lanes, NewtonFactorization, V6};
use crate::del::JointForces;
use crate::scheme::Scheme;
use vidyn_rbd::Model;

impl NewtonFactorization {
    /// Solves `J x = f` with the factors of [`Self::factorize`]. `f`: `(s·n,)` indexed
    /// `ϱ·n + i` like the residual; `x`: `(s·n,)` indexed `(γ−1)·n + i` like the unknowns.
    /// The Newton direction is `solve(−r)`.
    pub(crate) fn solve(&mut self, model: &Model, sc: &Scheme, dt: f64, f: &[f64], x: &mut [f64]) {
        if let Some(dense) = self.dense.as_ref().filter(|_| self.dense_now) {
            dense.solve::<1>(f.as_chunks::<1>().0, x.as_chunks_mut::<1>().0);
            return;
        }
        // the scratch leaves `self` for the sweep, which reads the factors (no allocation)
        let mut sweep = std::mem::take(&mut self.one);
        let (f, x) = (f.as_chunks::<1>().0, x.as_chunks_mut::<1>().0);
        self.sweep(&mut sweep, model, sc, dt, None, f, x, None, None);
        self.one = sweep;
    }

    /// [`Self::solve`] for `LANES` right-hand sides at once: `f` `(s·n)` rows of lanes, `x`
    /// `(s·n)`, `momentum` `(n)` (needs a factorisation with the momentum row), and
    /// `prescribed_rows` `(n)`: for each prescribed body the sum over its rows `x = 0..s` (the
    /// momentum row included) of their variation `J x` (the rows the solve drops; the module
    /// docs' `δr_i^ϱ` of that body, from its own `δ̄v_i`, `η_i` once its subtree is eliminated,
    /// as the momentum row; same factorisation). Call [`Self::ensure_lanes`] first.
    // the step (model, scheme, Δt, joint forces), the right-hand sides and solution, and the
    // two optional rows of the linearisation: grouping them would only rename them
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
        if let Some(dense) = self.dense.as_ref().filter(|_| self.dense_now) {
            dense.solve::<LANES>(f, x);
            dense.eliminated_rows(x, momentum, prescribed_rows);
            return;
        }
        let mut sweep = std::mem::take(&mut self.lanes);
        self.sweep::<LANES>(&mut sweep, model, sc, dt, Some(forces), f, x, momentum, prescribed_rows);
        self.lanes = sweep;
    }

    /// The sweeps for `W` right-hand sides with the scratch `sw`; `forces` is needed with
    /// `momentum` or `prescribed_rows` only.
    // the step (model, scheme, Δt, joint forces), the right-hand sides and solution, and the
    // two optional rows of the linearisation: grouping them would only rename them
    #[allow(clippy::too_many_arguments)]
    fn sweep<const W: usize>(
        &self,
        sw: &mut Sweep<W>,
        model: &Model,
        sc: &Scheme,
        dt: f64,
        forces: Option<&JointForces>,
        f: &[[f64; W]],
        x: &mut [[f64; W]],
        momentum: Option<&mut [[f64; W]]>,
        prescribed_rows: Option<&mut [[f64; W]]>,
    ) {
        match self.s {
            1 => self.sweep_sized::<1, W>(sw, model, sc, dt, forces, f, x, momentum, prescribed_rows),
            _ => self.sweep_sized::<0, W>(sw, model, sc, dt, forces, f, x, momentum, prescribed_rows),
        }
    }

    /// [`Self::sweep`] for `s = S` known at compile time (`S = 0`: read at run time), as
    /// [`Self::factorize_sized`].
    // the step (model, scheme, Δt, joint forces), the right-hand sides and solution, and the
    // two optional rows of the linearisation: grouping them would only rename them
    #[allow(clippy::too_many_arguments)]
    fn sweep_sized<const S: usize, const W: usize>(
        &self,
        sw: &mut Sweep<W>,
        model: &Model,
        sc: &Scheme,
        dt: f64,
        forces: Option<&JointForces>,
        f: &[[f64; W]],
        x: &mut [[f64; W]],
        mut momentum: Option<&mut [[f64; W]]>,
        mut prescribed_rows: Option<&mut [[f64; W]]>,
    ) {
        let (n, s) = (self.n, sized::<S>(self.s));
        let p = s + 1;
        let sums = prescribed_rows.is_some();
        let mixing = sc.mixes_rows();
        // the impulse rows the sweep carries: the momentum row when it is asked for, and every
        // control-point row when the rows mix
        let row_s = momentum.is_some() || sums;
        debug_assert!(!row_s || (self.rows == p && forces.is_some()), "the factorisation does not carry the momentum row");
        let rows = if row_s || mixing { p } else { s };
        let w = &sc.weights;
        let inv_dt = 1.0 / dt;
        let zero = [0.0; W];
        // `a` (l), `b` (ζ) are zero on entry (module invariant: each sweep clears a body's
        // entries once it has used them), so the children's sums need no clearing pass
        for i in (0..n).rev() {
            let kp = i * p;
            // ξ̄^ϱ = w_ϱΔt ψ^ϱ·l^ϱ + S̄^ϱ·ζ^ϱ + Σ_β a^{ϱβ} S̄^β·l^β, and y = Λ̄ (f − ξ̄)
            for beta in 0..p {
                sw.dots[beta] = dot_l6(&self.col[kp + beta], &sw.a[kp + beta]);
            }
            for r in 0..rows {
                let t1 = dot_l6(&self.rate[kp + r], &sw.a[kp + r]);
                let t2 = dot_l6(&self.col[kp + r], &sw.b[kp + r]);
                let wdt = w[r] * dt;
                let mut xi = zero;
                for c in 0..W {
                    xi[c] = wdt * t1[c] + t2[c];
                }
                for beta in 0..p {
                    let coef = w[beta] * sc.b(beta, r);
                    for c in 0..W {
                        xi[c] += coef * sw.dots[beta][c];
                    }
                }
                sw.xi_rows[r] = xi;
            }
            // the step-variable rows Σ_{α ≥ x} mix[x][α] ξ̄^α (ξ̄^x for Lobatto schemes), the
            // momentum row x = s only when it is asked for
            let mut total = zero;
            for x in 0..if row_s { p } else { s } {
                let xi = if mixing {
                    let mut xi = zero;
                    for a in x..rows {
                        let m = sc.mix(x, a);
                        if m != 0.0 {
                            for c in 0..W {
                                xi[c] += m * sw.xi_rows[a][c];
                            }
                        }
                    }
                    xi
                } else {
                    sw.xi_rows[x]
                };
                if sums && self.prescribed[i] {
                    for c in 0..W {
                        total[c] += xi[c];
                    }
                }
                if x < s {
                    let fr = &f[x * n + i];
                    for c in 0..W {
                        sw.small[x][c] = fr[c] - xi[c];
                    }
                } else {
                    sw.xis[i] = xi;
                }
            }
            if sums {
                sw.xi_sums[i] = total;
            }
            let inv = &self.inv[i * s * s..(i + 1) * s * s];
            for gm in 0..s {
                let mut v = zero;
                for r in 0..s {
                    let coef = inv[gm * s + r];
                    for c in 0..W {
                        v[c] += coef * sw.small[r][c];
                    }
                }
                sw.y[i * s + gm] = v;
            }
            if let Some(par) = model.parents[i] {
                // B.1c, B.3c (with Ĥ, Φ̂)
                let pp = par * p;
                for a in 0..p {
                    let mut acc = sw.a[kp + a];
                    for gm in 0..s {
                        axpy_l6(&mut acc, &self.h[(kp + a) * s + gm], &sw.y[i * s + gm]);
                    }
                    add_l6(&mut sw.a[pp + a], &acc);
                }
                for r in 0..rows {
                    let mut acc = sw.b[kp + r];
                    for gm in 0..s {
                        axpy_l6(&mut acc, &self.phi[(kp + r) * s + gm], &sw.y[i * s + gm]);
                    }
                    add_l6(&mut sw.b[pp + r], &acc);
                }
            }
            sw.a[kp..kp + p].fill([zero; 6]);
            sw.b[kp..kp + p].fill([zero; 6]);
        }
        // forward pass (digest §4): δq_i, η_i (stored at α = 1..s), δ̄v_i (α = 0..s)
        for i in 0..n {
            let kp = i * p;
            let parent = model.parents[i];
            for gm in 0..s {
                let mut v = sw.y[i * s + gm];
                if let Some(par) = parent {
                    let pp = par * p;
                    for r in 0..p {
                        let t = dot_l6(&self.x[(i * p + r) * s + gm], &sw.dv[pp + r]);
                        for c in 0..W {
                            v[c] += t[c];
                        }
                    }
                    for nu in 0..s {
                        let t = dot_l6(&self.y[(i * s + nu) * s + gm], &sw.eta[pp + nu + 1]);
                        for c in 0..W {
                            v[c] += t[c];
                        }
                    }
                }
                sw.dq[gm] = v;
                x[gm * n + i] = v;
            }
            for a in 0..p {
                let (eta_par, dv_par) = match parent {
                    Some(par) => (sw.eta[par * p + a], sw.dv[par * p + a]),
                    None => ([zero; 6], [zero; 6]),
                };
                // δ̄v^α = δ̄v_λ^α + S̄^α δq̇^α + ψ^α δq^α, η^α = η_λ^α + S̄^α δq^α (D.16, D.17)
                let mut dv = dv_par;
                axpy_l6(&mut dv, &self.col[kp + a], &joint_rate(sc, a, s, inv_dt, &sw.dq));
                if a >= 1 {
                    let dqa = sw.dq[a - 1];
                    axpy_l6(&mut dv, &self.rate[kp + a], &dqa);
                    let mut eta = eta_par;
                    axpy_l6(&mut eta, &self.col[kp + a], &dqa);
                    sw.eta[kp + a] = eta;
                } else {
                    sw.eta[kp] = [zero; 6];
                }
                sw.dv[kp + a] = dv;
            }
            if let (Some(out), Some(forces)) = (momentum.as_deref_mut(), forces) {
                // row s, with its δQ
                let force = |gm: usize| joint_force_derivative(sc, dt, forces, i, s, gm);
                out[i] = eliminated_row(
                    sw.xis[i],
                    &self.theta_s[kp..kp + p],
                    &self.xi_s[i * s..(i + 1) * s],
                    &sw.dv[kp..kp + p],
                    &sw.eta[kp + 1..kp + p],
                    &sw.dq,
                    force,
                );
            }
            if let (Some(out), Some(forces)) = (prescribed_rows.as_deref_mut().filter(|_| self.prescribed[i]), forces) {
                // the sum of rows 0..=s, with their δQ
                let force = |gm: usize| (0..p).map(|x| joint_force_derivative(sc, dt, forces, i, x, gm)).sum::<f64>();
                out[i] = eliminated_row(
                    sw.xi_sums[i],
                    &self.theta_sum[kp..kp + p],
                    &self.xi_sum[i * s..(i + 1) * s],
                    &sw.dv[kp..kp + p],
                    &sw.eta[kp + 1..kp + p],
                    &sw.dq,
                    force,
                );
            }
        }
    }
}

/// `δq̇^α = (1/Δt) Σ_γ b^{αγ} δq^γ` (`γ = 1..=s`, `δq^0 = 0`) of every lane. One lane scales the
/// sum, several lanes scale the coefficients: each is the rounding that needs fewer
/// multiplications, and each is what the Newton direction (one lane) and the linearisation
/// (`LANES`) have always computed, so both stay bit for bit as they were.
#[inline(always)]
fn joint_rate<const W: usize>(sc: &Scheme, a: usize, s: usize, inv_dt: f64, dq: &[[f64; W]]) -> [f64; W] {
    let mut r = [0.0; W];
    if W == 1 {
        for gm in 1..=s {
            r[0] += sc.b(a, gm) * dq[gm - 1][0];
        }
        r[0] *= inv_dt;
    } else {
        for gm in 1..=s {
            let coef = sc.b(a, gm) * inv_dt;
            for c in 0..W {
                r[c] += coef * dq[gm - 1][c];
            }
        }
    }
    r
}

/// A row of body `i` once its subtree is eliminated (module docs of `newton_direction`,
/// "The momentum row"): `ξ̄ + Σ_ρ Θ̄^ρ·δ̄v_i^ρ + Σ_ν Ξ̄^ν·η_i^ν − Σ_γ ∂Q/∂q^γ δq_i^γ`, with
/// `theta` `(s+1)`, `xi` `(s)`, `dv` `(s+1)` and `eta` of points `1..=s`, `dq` the body's own
/// `δq^γ` (`γ = 1..=s`) and `force(γ)` the row's `∂Q/∂q^γ`.
#[inline]
fn eliminated_row<const W: usize>(
    xi_bar: [f64; W],
    theta: &[V6],
    xi: &[V6],
    dv: &[L6<W>],
    eta: &[L6<W>],
    dq: &[[f64; W]],
    force: impl Fn(usize) -> f64,
) -> [f64; W] {
    let mut v = xi_bar;
    for (t, d) in theta.iter().zip(dv) {
        let t = dot_l6(t, d);
        for c in 0..W {
            v[c] += t[c];
        }
    }
    for (x, e) in xi.iter().zip(eta) {
        let t = dot_l6(x, e);
        for c in 0..W {
            v[c] += t[c];
        }
    }
    for (g, d) in dq.iter().enumerate().take(xi.len()) {
        let coef = force(g + 1);
        for c in 0..W {
            v[c] -= coef * d[c];
        }
    }
    v
}
