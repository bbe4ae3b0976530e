//! Directional derivatives of the energy Hessians by forward-mode automatic differentiation:
//! the third derivatives of the Lagrangian `L = K − V` contracted with one direction, which is
//! all the second-order flow-map derivatives need (module `second_order`).
//!
//! [`Dual`] is the dual number `a + b ε` (`ε² = 0`): evaluating a function on `x + ε d` gives
//! `f(x) + ε f'(x)·d` exactly, with no truncation error. [`DualHessians::update`] evaluates the
//! control-point kinematics of [`crate::point`] and the O(n·d) energy Hessians of
//! [`crate::hessians`] (Fan, Schultz & Murphey 2018, Algorithms 2 and 3 as translated there) on
//! `(q + ε δq, q̇ + ε δq̇)`, so its `ε` parts are
//! `d/dε [K_qq, K_q̇q, K_q̇q̇, V_qq](q + ε δq, q̇ + ε δq̇)`, i.e. `Σ_k (δq_k ∂_{q_k} + δq̇_k ∂_{q̇_k})`
//! of each Hessian, exact to rounding, in O(n·d) dual operations (d the depth of the tree).
//!
//! # Single source of truth
//! The f64 code of [`crate::point`] and [`crate::hessians`] is the definition (the integrator,
//! the Newton factorisation and the first-order linearisation use it). This module repeats its
//! recursions over dual numbers, with one representation change that avoids dividing by a
//! dual mass: composite inertias are kept as `(m, h = m c, I_o)` (rotational inertia about the
//! world origin) instead of `(m, c, I_c)`; the spatial products are the same
//! (`I·[v; ω] = [m v − h×ω; I_o ω + h×v]`). `tests::real_parts_equal_the_f64_hessians` pins the
//! real parts to the f64 Hessians and `tests::dual_parts_match_differences_of_the_f64_hessians`
//! the `ε` parts to central differences of them.
//!
//! Why a copy and not the f64 code made generic over the scalar (issue 22, item 5, weighed and
//! left): the f64 recursions are written on `vidyn_spatial`'s `Se3`, `Motion`, `Force` and
//! `Inertia` and on `Joint::placed_transform` of `vidyn_rbd`, all f64-only and shared by
//! every crate of the workspace, so a generic scalar there is a change to those crates, not to
//! this one. And it would not be free of change here: on `Dual`, the f64 bookkeeping
//! (`Inertia + Inertia` re-centres at the summed CoM, dividing by the mass; rotations composed
//! as `Se3` products) rounds differently from this copy, so every second-order derivative
//! would move in its last bits (the real parts of this copy already differ from the f64
//! Hessians in 254 of 583 non-zero entries of the test trees, by rounding). The part both
//! share in form, the walk over each root path that writes `K_q̇q̇, K_q̇q, K_qq, V_qq` from
//! `𝓜ᴬ, 𝓜ᴮ, g × w`, is twenty lines over different types; a trait spanning both would be
//! longer than the copy.

use crate::hessians::EnergyHessians;
use nalgebra::{DMatrix, Matrix3, Vector3};
use num_traits::{One, Zero};
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};
use vidyn_rbd::{Joint, Model};
use vidyn_spatial::Se3;

/// The dual number `re + du ε`, `ε² = 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Dual {
    pub re: f64,
    pub du: f64,
}

impl Dual {
    #[inline]
    pub(crate) const fn new(re: f64, du: f64) -> Self {
        Self { re, du }
    }
    /// A constant (zero derivative).
    #[inline]
    pub(crate) const fn c(re: f64) -> Self {
        Self { re, du: 0.0 }
    }
    #[inline]
    fn sin_cos(self) -> (Self, Self) {
        let (s, c) = vidyn_spatial::sin_cos(self.re);
        (Self::new(s, c * self.du), Self::new(c, -s * self.du))
    }
}

impl Add for Dual {
    type Output = Dual;
    #[inline]
    fn add(self, o: Dual) -> Dual {
        Dual::new(self.re + o.re, self.du + o.du)
    }
}
impl Sub for Dual {
    type Output = Dual;
    #[inline]
    fn sub(self, o: Dual) -> Dual {
        Dual::new(self.re - o.re, self.du - o.du)
    }
}
impl Mul for Dual {
    type Output = Dual;
    #[inline]
    fn mul(self, o: Dual) -> Dual {
        Dual::new(self.re * o.re, self.re * o.du + self.du * o.re)
    }
}
impl Div for Dual {
    type Output = Dual;
    #[inline]
    fn div(self, o: Dual) -> Dual {
        Dual::new(self.re / o.re, (self.du * o.re - self.re * o.du) / (o.re * o.re))
    }
}
impl Neg for Dual {
    type Output = Dual;
    #[inline]
    fn neg(self) -> Dual {
        Dual::new(-self.re, -self.du)
    }
}
impl AddAssign for Dual {
    #[inline]
    fn add_assign(&mut self, o: Dual) {
        *self = *self + o;
    }
}
impl SubAssign for Dual {
    #[inline]
    fn sub_assign(&mut self, o: Dual) {
        *self = *self - o;
    }
}
impl MulAssign for Dual {
    #[inline]
    fn mul_assign(&mut self, o: Dual) {
        *self = *self * o;
    }
}
impl Zero for Dual {
    #[inline]
    fn zero() -> Self {
        Dual::c(0.0)
    }
    #[inline]
    fn is_zero(&self) -> bool {
        self.re == 0.0 && self.du == 0.0
    }
}
impl One for Dual {
    #[inline]
    fn one() -> Self {
        Dual::c(1.0)
    }
}

type V3 = Vector3<Dual>;
type M3 = Matrix3<Dual>;

#[inline]
fn lift3(v: &Vector3<f64>) -> V3 {
    v.map(Dual::c)
}
#[inline]
fn scale(v: &V3, s: Dual) -> V3 {
    v.map(|x| x * s)
}

/// A twist or wrench `[linear; angular]` over dual numbers.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sv {
    lin: V3,
    ang: V3,
}

impl Sv {
    fn zero() -> Self {
        Self { lin: V3::zeros(), ang: V3::zeros() }
    }
    /// Motion cross product `self ×ₘ m = [ω×v' + v×ω'; ω×ω']`.
    #[inline]
    fn cross_motion(&self, m: &Sv) -> Sv {
        Sv { lin: self.ang.cross(&m.lin) + self.lin.cross(&m.ang), ang: self.ang.cross(&m.ang) }
    }
    /// Force cross product `self ×* f = [ω×f; ω×n + v×f]`.
    #[inline]
    fn cross_force(&self, f: &Sv) -> Sv {
        Sv { lin: self.ang.cross(&f.lin), ang: self.ang.cross(&f.ang) + self.lin.cross(&f.lin) }
    }
    /// Pairing of a motion with a force, `v·f + ω·n`.
    #[inline]
    fn dot(&self, f: &Sv) -> Dual {
        self.lin.dot(&f.lin) + self.ang.dot(&f.ang)
    }
    #[inline]
    fn add(&self, o: &Sv) -> Sv {
        Sv { lin: self.lin + o.lin, ang: self.ang + o.ang }
    }
}

/// Spatial inertia in the world frame as `(m, h = m c, I_o)` (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Inert {
    m: f64,
    h: V3,
    io: M3,
}

impl Inert {
    /// `I·[v; ω] = [m v − h×ω; I_o ω + h×v]`.
    #[inline]
    fn mul_motion(&self, x: &Sv) -> Sv {
        Sv { lin: scale(&x.lin, Dual::c(self.m)) - self.h.cross(&x.ang), ang: self.io * x.ang + self.h.cross(&x.lin) }
    }
}

/// Dual-number scratch and results of one control point (allocated once, O(n²)).
#[derive(Clone, Debug)]
pub(crate) struct DualHessians {
    rot: Vec<M3>,
    pos: Vec<V3>,
    cols: Vec<Sv>,
    rates: Vec<Sv>,
    twists: Vec<Sv>,
    momenta: Vec<Sv>,
    composites: Vec<Inert>,
    sigma_m: Vec<f64>,
    lever: Vec<V3>,
    /// `K_qq`, `K_q̇q` (`[a, b] = ∂/∂q_b ∂K/∂q̇_a`), `K_q̇q̇`, `V_qq` over dual numbers, n×n.
    pub kqq: DMatrix<Dual>,
    pub kvq: DMatrix<Dual>,
    pub kvv: DMatrix<Dual>,
    pub vqq: DMatrix<Dual>,
}

impl DualHessians {
    pub(crate) fn new(n: usize) -> Self {
        let z = DMatrix::from_element(n, n, Dual::c(0.0));
        Self {
            rot: vec![M3::identity(); n],
            pos: vec![V3::zeros(); n],
            cols: vec![Sv::zero(); n],
            rates: vec![Sv::zero(); n],
            twists: vec![Sv::zero(); n],
            momenta: vec![Sv::zero(); n],
            composites: vec![Inert { m: 0.0, h: V3::zeros(), io: M3::zeros() }; n],
            sigma_m: vec![0.0; n],
            lever: vec![V3::zeros(); n],
            kqq: z.clone(),
            kvq: z.clone(),
            kvv: z.clone(),
            vqq: z,
        }
    }

    /// Evaluates the energy Hessians at `(q + ε dq, q̇ + ε dqdot)` with the joints placed at
    /// `placements` (`(nbodies,)`: the model's, or a step chart's; revolute and prismatic
    /// joints only, as checked by [`crate::VariationalIntegrator::new`]). O(n·d), no
    /// allocation. Mirrors `PointState::update` followed by `EnergyHessians::update`.
    pub(crate) fn update(&mut self, model: &Model, placements: &[Se3], q: &[f64], qdot: &[f64], dq: &[f64], dqdot: &[f64]) {
        let n = model.nbodies();
        for i in 0..n {
            let qi = Dual::new(q[i], dq[i]);
            let (jr, jp, col_local) = match &model.joints[i] {
                Joint::Revolute { axis } => {
                    let (s, c) = qi.sin_cos();
                    let t = Dual::c(1.0) - c;
                    let (x, y, z) = (Dual::c(axis.x), Dual::c(axis.y), Dual::c(axis.z));
                    let r = M3::new(
                        c + t * x * x,
                        t * x * y - s * z,
                        t * x * z + s * y,
                        t * x * y + s * z,
                        c + t * y * y,
                        t * y * z - s * x,
                        t * x * z - s * y,
                        t * y * z + s * x,
                        c + t * z * z,
                    );
                    (r, V3::zeros(), Sv { lin: V3::zeros(), ang: lift3(axis) })
                }
                Joint::Prismatic { axis } => (M3::identity(), scale(&lift3(axis), qi), Sv { lin: lift3(axis), ang: V3::zeros() }),
                _ => unreachable!("VariationalIntegrator::new admits revolute and prismatic joints only"),
            };
            let x = &placements[i];
            let (xr, xp) = (x.rotation.map(Dual::c), lift3(&x.translation));
            // local = X_J(i) · joint transform; o = parent · local
            let (lr, lp) = (xr * jr, xp + xr * jp);
            let (pr, pp, ptw) = match model.parents[i] {
                Some(p) => (self.rot[p], self.pos[p], self.twists[p]),
                None => (M3::identity(), V3::zeros(), Sv::zero()),
            };
            let (r, p) = (pr * lr, pp + pr * lp);
            let w = r * col_local.ang;
            let col = Sv { lin: r * col_local.lin + p.cross(&w), ang: w };
            self.rot[i] = r;
            self.pos[i] = p;
            self.cols[i] = col;
            self.rates[i] = ptw.cross_motion(&col);
            let qd = Dual::new(qdot[i], dqdot[i]);
            self.twists[i] = ptw.add(&Sv { lin: scale(&col.lin, qd), ang: scale(&col.ang, qd) });
            let body = &model.inertias[i];
            let c = p + r * lift3(&body.com);
            let m = Dual::c(body.mass);
            let ic = r * body.rot_inertia.map(Dual::c) * r.transpose();
            // I_o = I_c + m (|c|² 1 − c cᵀ) (parallel axes)
            let io = ic + (M3::identity() * c.dot(&c) - c * c.transpose()) * m;
            let inert = Inert { m: body.mass, h: scale(&c, m), io };
            self.momenta[i] = inert.mul_motion(&self.twists[i]);
            self.composites[i] = inert;
            self.sigma_m[i] = body.mass;
        }
        for i in (0..n).rev() {
            if let Some(p) = model.parents[i] {
                let (mu, comp, sm) = (self.momenta[i], self.composites[i], self.sigma_m[i]);
                self.momenta[p] = self.momenta[p].add(&mu);
                let cp = &mut self.composites[p];
                cp.m += comp.m;
                cp.h += comp.h;
                cp.io += comp.io;
                self.sigma_m[p] += sm;
            }
        }
        for i in 0..n {
            // w_i = ω_i × σp_i + σm_i v_i with σp_i = h of the composite
            let col = &self.cols[i];
            self.lever[i] = col.ang.cross(&self.composites[i].h) + scale(&col.lin, Dual::c(self.sigma_m[i]));
        }
        let g = lift3(&model.gravity.linear);
        for i in 0..n {
            let comp = &self.composites[i];
            let ma = comp.mul_motion(&self.cols[i]);
            let mb = comp.mul_motion(&self.rates[i]).add(&self.cols[i].cross_force(&self.momenta[i]));
            let g_cross_w = g.cross(&self.lever[i]);
            let mut body = Some(i);
            while let Some(j) = body {
                let (sj, psij) = (&self.cols[j], &self.rates[j]);
                let mvv = sj.dot(&ma);
                self.kvv[(i, j)] = mvv;
                self.kvv[(j, i)] = mvv;
                self.kvq[(i, j)] = psij.dot(&ma);
                self.kvq[(j, i)] = sj.dot(&mb);
                let kqq = psij.dot(&mb);
                self.kqq[(i, j)] = kqq;
                self.kqq[(j, i)] = kqq;
                let vqq = sj.ang.dot(&g_cross_w);
                self.vqq[(i, j)] = vqq;
                self.vqq[(j, i)] = vqq;
                body = model.parents[j];
            }
        }
        // entries off every root path stay as initialised (zero) — they are never written
    }

    /// Copies the real parts into f64 Hessians (for the tests).
    #[cfg(test)]
    pub(crate) fn real_parts(&self, out: &mut EnergyHessians) {
        for (dst, src) in [(&mut out.kqq, &self.kqq), (&mut out.kvq, &self.kvq), (&mut out.kvv, &self.kvv), (&mut out.vqq, &self.vqq)] {
            dst.zip_apply(src, |d, s| *d = s.re);
        }
    }

    /// Copies the `ε` parts into f64 Hessians.
    pub(crate) fn dual_parts(&self, out: &mut EnergyHessians) {
        for (dst, src) in [(&mut out.kqq, &self.kqq), (&mut out.kvq, &self.kvq), (&mut out.kvv, &self.kvv), (&mut out.vqq, &self.vqq)] {
            dst.zip_apply(src, |d, s| *d = s.du);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::point::PointState;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use vidyn_rbd::builders::random_tree;

    fn one_dof() -> Vec<Joint> {
        Joint::examples().into_iter().filter(|j| j.nv() == 1).collect()
    }

    fn hessians(model: &Model, q: &[f64], v: &[f64]) -> EnergyHessians {
        let mut st = PointState::new(model.nv);
        st.update(model, q, v);
        let mut h = EnergyHessians::new(model.nv);
        h.update(model, &st);
        h
    }

    #[test]
    fn real_parts_equal_the_f64_hessians() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (nb, seed) in [(1, 1), (6, 2), (12, 5)] {
            let model = random_tree(nb, seed, &one_dof());
            let n = model.nv;
            let r = |rng: &mut ChaCha8Rng| (0..n).map(|_| rng.random_range(-1.5..1.5)).collect::<Vec<f64>>();
            let (q, v, dq, dv) = (r(&mut rng), r(&mut rng), r(&mut rng), r(&mut rng));
            let want = hessians(&model, &q, &v);
            let mut dh = DualHessians::new(n);
            dh.update(&model, &model.joint_placements, &q, &v, &dq, &dv);
            let mut got = EnergyHessians::new(n);
            dh.real_parts(&mut got);
            for (g, w) in [(&got.kqq, &want.kqq), (&got.kvq, &want.kvq), (&got.kvv, &want.kvv), (&got.vqq, &want.vqq)] {
                // different but algebraically equal inertia bookkeeping: rounding only
                assert!((g - w).amax() <= 1e-12 * (1.0 + w.amax()), "{}", (g - w).amax());
            }
        }
    }

    #[test]
    fn dual_parts_match_differences_of_the_f64_hessians() {
        // central differences of the exact f64 Hessians, h = 1e-6: truncation ~h²·|H'''| and
        // round-off ~ε|H|/h ≈ 2e-10|H|, so 1e-7·(1 + |H|) is a wide margin for a correct ε
        // part and far below the size of any wrong term
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let h = 1e-6;
        for (nb, seed) in [(3, 1), (7, 9), (10, 4)] {
            let model = random_tree(nb, seed, &one_dof());
            let n = model.nv;
            let r = |rng: &mut ChaCha8Rng| (0..n).map(|_| rng.random_range(-1.5..1.5)).collect::<Vec<f64>>();
            let (q, v, dq, dv) = (r(&mut rng), r(&mut rng), r(&mut rng), r(&mut rng));
            let at = |t: f64| {
                let qs: Vec<f64> = q.iter().zip(&dq).map(|(a, b)| a + t * b).collect();
                let vs: Vec<f64> = v.iter().zip(&dv).map(|(a, b)| a + t * b).collect();
                hessians(&model, &qs, &vs)
            };
            let (hp, hm) = (at(h), at(-h));
            let mut dh = DualHessians::new(n);
            dh.update(&model, &model.joint_placements, &q, &v, &dq, &dv);
            let mut got = EnergyHessians::new(n);
            dh.dual_parts(&mut got);
            for (g, p, m) in [(&got.kqq, &hp.kqq, &hm.kqq), (&got.kvq, &hp.kvq, &hm.kvq), (&got.kvv, &hp.kvv, &hm.kvv), (&got.vqq, &hp.vqq, &hm.vqq)] {
                let fd = (p - m) / (2.0 * h);
                assert!((g - &fd).amax() <= 1e-7 * (1.0 + fd.amax()), "{} vs |fd| {}", (g - &fd).amax(), fd.amax());
                assert!(fd.amax() > 1e-3, "the test must exercise a non-trivial derivative");
            }
        }
    }
}
