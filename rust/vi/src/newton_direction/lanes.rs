//! Right-hand sides in lanes: `W` right-hand sides processed together, one `f64` per lane
//! (`[f64; W]`), and the 6-vectors of the sweeps as `[component][lane]`. The sweeps of module
//! `solve` are written once over `W` (`W = 1`: a Newton direction, `W = LANES`: the columns of
//! the linearisation); this module holds the lane kernels, the sweep scratch and the DEL
//! Jacobian–vector product `J δz` on `LANES` variations.

use super::{sized, NewtonFactorization, M6, V6};
use crate::del::JointForces;
use crate::scheme::Scheme;
use vidyn_rbd::Model;

/// Number of right-hand sides processed together by the lane (batched) sweeps.
pub(crate) const LANES: usize = 8;
/// One scalar per right-hand side.
pub(crate) type Lanes = [f64; LANES];
/// One 6-vector per right-hand side, `[component][lane]`.
pub(super) type L6<const W: usize> = [[f64; W]; 6];

pub(crate) const ZERO_L6: L6<LANES> = [[0.0; LANES]; 6];

/// `v · a` lane-wise, each lane summed in component order from `+0` (as nalgebra's `dot` of a
/// 6-vector, so that one lane gives `v.dot(a)` bit for bit).
#[inline(always)]
pub(super) fn dot_l6<const W: usize>(v: &V6, a: &L6<W>) -> [f64; W] {
    let mut r = [0.0; W];
    for k in 0..6 {
        let vk = v[k];
        for c in 0..W {
            r[c] += vk * a[k][c];
        }
    }
    r
}

/// `a += v ⊗ t` (`a[k][c] += v[k] t[c]`).
#[inline(always)]
pub(super) fn axpy_l6<const W: usize>(a: &mut L6<W>, v: &V6, t: &[f64; W]) {
    for k in 0..6 {
        let vk = v[k];
        for c in 0..W {
            a[k][c] += vk * t[c];
        }
    }
}

/// `a += b`.
#[inline(always)]
pub(crate) fn add_l6<const W: usize>(a: &mut L6<W>, b: &L6<W>) {
    for k in 0..6 {
        for c in 0..W {
            a[k][c] += b[k][c];
        }
    }
}

/// `m x` lane-wise (`m(r, c)` given by `entry`), each row summed over the columns in order
/// from the first product, as nalgebra's matrix–vector product: one lane gives its bits.
#[inline(always)]
fn product_l6(entry: impl Fn(usize, usize) -> f64, x: &L6<LANES>) -> L6<LANES> {
    let mut out = ZERO_L6;
    for (r, o) in out.iter_mut().enumerate() {
        *o = x[0].map(|v| entry(r, 0) * v);
        for (c, xc) in x.iter().enumerate().skip(1) {
            let m = entry(r, c);
            for (ol, &v) in o.iter_mut().zip(xc) {
                *ol += m * v;
            }
        }
    }
    out
}

/// `m x` lane-wise, as `m * x` of nalgebra on each lane.
#[inline(always)]
pub(crate) fn mul_l6(m: &M6, x: &L6<LANES>) -> L6<LANES> {
    product_l6(|r, c| m[(r, c)], x)
}

/// `mᵀ x` lane-wise, as `m.transpose() * x` of nalgebra on each lane.
#[inline(always)]
pub(crate) fn mul_transposed_l6(m: &M6, x: &L6<LANES>) -> L6<LANES> {
    product_l6(|r, c| m[(c, r)], x)
}

/// Scratch of the sweeps over `W` right-hand sides (module `solve`; the lane one also serves
/// the Jacobian–vector product).
#[derive(Clone, Debug, Default)]
pub(super) struct Sweep<const W: usize> {
    /// `l` (solve) or `δ̄μ` (JVP), `[i·P + α]`.
    pub(super) a: Vec<L6<W>>,
    /// `ζ` (solve) or `δ̄Γ` (JVP), `[i·P + ϱ]`. `a` and `b` are all zero between sweeps: a
    /// sweep clears each body's entries after their last use, so the next one accumulates the
    /// children's terms from zero without a clearing pass over the whole tree.
    pub(super) b: Vec<L6<W>>,
    pub(super) eta: Vec<L6<W>>,
    pub(super) dv: Vec<L6<W>>,
    pub(super) y: Vec<[f64; W]>,
    /// `ξ̄^s` of each body (the momentum row).
    pub(super) xis: Vec<[f64; W]>,
    pub(super) small: Vec<[f64; W]>,
    /// `ξ̄^α` of the control-point rows, `(s+1,)`.
    pub(super) xi_rows: Vec<[f64; W]>,
    /// `Σ_x ξ̄^x` over the rows of each prescribed body, `(n,)`.
    pub(super) xi_sums: Vec<[f64; W]>,
    pub(super) dq: Vec<[f64; W]>,
    pub(super) dots: Vec<[f64; W]>,
}

impl<const W: usize> Sweep<W> {
    pub(super) fn new(n: usize, s: usize) -> Self {
        let p = s + 1;
        let (z, z6) = ([0.0; W], [[0.0; W]; 6]);
        Self {
            a: vec![z6; n * p],
            b: vec![z6; n * p],
            eta: vec![z6; n * p],
            dv: vec![z6; n * p],
            y: vec![z; n * s],
            xis: vec![z; n],
            small: vec![z; s],
            xi_rows: vec![z; p],
            xi_sums: vec![z; n],
            dq: vec![z; p],
            dots: vec![z; p],
        }
    }
}

impl NewtonFactorization {
    /// Allocates the lane scratch (once per workspace; the linearisation calls it).
    pub(crate) fn ensure_lanes(&mut self) {
        let (n, s, p) = (self.n, self.s, self.s + 1);
        if self.lanes.a.len() != n * p {
            self.lanes = Sweep::new(n, s);
            self.lane_inertia = vec![M6::zeros(); n * p];
        }
    }

    /// The DEL Jacobian–vector product (module docs, "Variations") for `LANES` directions at
    /// once, O(s² n) each: `dq` `((s+1)·n)` rows of lanes indexed `α·n + i` (`α = 0`
    /// included); writes the variation of every DEL row `Σ_α mix[x][α] (D_{α+1} L_d + Q^α)`
    /// (`x = 0..s`, row `s` is `p_{k+1}`) to `out` (same layout). Uses the kinematics of the last
    /// [`Self::factorize`]; call [`Self::ensure_lanes`] first.
    pub(crate) fn del_jvp_lanes(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, dq: &[Lanes], out: &mut [Lanes]) {
        if let Some(dense) = self.dense.as_ref().filter(|_| self.dense_now) {
            dense.jvp(dq, out);
            return;
        }
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
            self.lane_inertia[k] = self.inertia[k].to_matrix();
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
                let mut dqdot = [0.0; LANES];
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
                let m = &self.lane_inertia[kp + a];
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
                let mut r = [0.0; LANES];
                let mut dqdot = [0.0; LANES];
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
            // cleared once used, as the solve leaves them (see `sweep_sized`)
            ls.a[kp..kp + p].fill(ZERO_L6);
            ls.b[kp..kp + p].fill(ZERO_L6);
        }
        if sc.mixes_rows() {
            // the step-variable rows, in place (ascending x reads unreplaced rows only)
            for x in 0..p {
                for i in 0..n {
                    let mut r = [0.0; LANES];
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
