//! The isotropic (second-order cone) friction model of a contact and the cone's algebra, for
//! the interior-point step of [`crate::contact`].
//!
//! **Model.** The friction force is a vector `b ∈ ℝ²` in the contact's tangent plane (world
//! directions `t₁`, `t₂`) inside the Coulomb cone `‖b‖ ≤ c_f γ`, chosen by maximum dissipation
//! (Stewart 2000; Howell, Le Cleac'h et al. 2022, "Dojo"):
//! `min_b v_tᵀ b` subject to `x = (c_f γ, b) ∈ Q`, with `v_t = B ż` the tangential velocity of
//! the contact point over the step (`B = [B₁ᵀ; B₂ᵀ]`, `B_i = [t_i; p × Rᵀt_i]` at `z_k`) and
//! `Q = {(u₀, ū) ∈ ℝ³ : u₀ ≥ ‖ū‖}` the second-order (Lorentz) cone. Its KKT conditions with the
//! dual `z ∈ Q` are `z = (ψ, v_t)` (stationarity in `b`) and the cone complementarity
//! `x ∘ z = 0`, where `∘` is the Jordan product of the cone,
//! $$u \circ w = (u_0 w_0 + \bar u^\top \bar w,\; u_0 \bar w + w_0 \bar u) = \mathrm{Arw}(u)\,w,
//! \qquad \mathrm{Arw}(u) = \begin{pmatrix} u_0 & \bar u^\top \\ \bar u & u_0 I \end{pmatrix}$$
//! (Alizadeh & Goldfarb 2003, §4). Sliding (`v_t ≠ 0`) forces both onto the boundary and
//! opposite: `b = −c_f γ v_t/‖v_t‖`, `ψ = ‖v_t‖`; sticking leaves `x` inside, `z = 0`. Unlike
//! the 4-direction pyramid the force bound is the same in every direction.
//!
//! **Relaxed system** (nonnegative orthant × second-order cone, Nocedal & Wright 2006
//! Alg. 19.1 with the cone's central path, Vandenberghe 2010 §4): besides the gap rows of
//! [`crate::contact`] (`s − φ = 0`, `γ s = μ`), a cone contact has the slack `z̄ ∈ ℝ²` of the
//! tangential velocity and the rows
//! $$r_c = \bar z - B\dot z = 0, \qquad r_{cc} = x \circ z - \mu e = 0, \quad e = (1, 0, 0),$$
//! `x = (c_f γ, b)`, `z = (ψ, z̄)` (Howell, Le Cleac'h et al. 2022 write the same pair with
//! `c_f γ` as a separate variable). Newton is taken on this relaxed system directly, as Dojo
//! does (no Nesterov–Todd scaling): with `δz̄ = B δż − r_c` substituted, the three cone rows
//! read `Arw(z) δx + Arw(x) (δψ, B δż) = −r_cc + Arw(x)(0, r_c)`, `δx = (c_f δγ, δb)`, so the
//! contact is one 4-dimensional graph node `(γ, b₁, b₂, ψ)` (the gap slack `s` is eliminated as
//! for the pyramid; the node stays a leaf of its body, so the elimination stays O(n)). Its
//! pivot block has determinant `s z₀ (x₀z₀ − x̄ᵀz̄)`, positive whenever `s > 0` and
//! `x, z ∈ int Q`, which the fraction-to-the-boundary rule keeps: the step is at most `τ` times
//! the distance to the cone's boundary along `δx` and along `δz` ([`step_to_boundary`]). The
//! linearisation ([`crate::linearize`]) differentiates the same rows at the converged point.
//!
//! **Accuracy and limits** (measured in the crate's tests). Sliding and sticking single
//! contacts and boxes sliding without turning converge like the pyramid (to 1e-13 at tolerance
//! 1e-15). With statically indeterminate contacts that slide and turn (a box on four corners
//! spinning while it slides) the iteration stalls near a weighted residual of 1e-11: the
//! barrier alone fixes the split of the normal forces, and the direction then pushes the
//! sliding pairs (`x`, `z` both near the boundary) into the boundary, so the steps shrink. The
//! default tolerance (1e-12, residual 1e-10) is reached; tighter ones may not be. A
//! Nesterov–Todd scaled direction (`W⁻¹δx + Wδz = μλ⁻¹ − λ`) was tried and was no better with
//! this merit line search. A hard impact of an articulated body's contact that ends sticking
//! (a two-link arm's tip swung into the floor at 1 rad/s) stalled at a residual of 1e-3 after
//! 100 iterations (the pyramid gets to 4e-10, also short of its 1e-10 target): the iterates
//! slide along the boundary of the dual cone towards its apex instead of entering it. A quick
//! Mehrotra predictor–corrector (adaptive centring, as Dojo uses) under this merit line search
//! made both models worse there; not pursued.
//!
//! `c_f > 0` is required: with `c_f = 0` the cone `‖b‖ ≤ 0` has no interior.

use crate::contact::ContactWorkspace;
use nalgebra::{Matrix6, Vector2, Vector3, Vector6};

/// The friction model of a contact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FrictionModel {
    /// The linearised 4-direction pyramid of Brüdigam et al. 2023 (eq. 4): exact along the
    /// tangents `±t₁`, `±t₂`, `√2` too strong along the diagonals.
    #[default]
    Pyramid,
    /// The isotropic second-order cone `‖b‖ ≤ c_f γ` (module docs).
    Cone,
    /// No friction: the normal force alone (the contact's node is `γ`). With `c_f = 0` the
    /// pyramid's cone row `c_f γ − Σβ ≥ 0`, `β ≥ 0` has no interior and its pivots lose their
    /// conditioning at an impact; this model drops the friction rows instead.
    Frictionless,
}

impl FrictionModel {
    /// The names accepted by [`Self::from_name`].
    pub const NAMES: [&'static str; 3] = ["pyramid", "cone", "frictionless"];

    /// The model called `name` (`"pyramid"`, `"cone"` or `"frictionless"`).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "pyramid" => Some(Self::Pyramid),
            "cone" => Some(Self::Cone),
            "frictionless" => Some(Self::Frictionless),
            _ => None,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Pyramid => "pyramid",
            Self::Cone => "cone",
            Self::Frictionless => "frictionless",
        }
    }

    /// Dimension of the contact's graph node: `(γ, β₁…β₄, ψ)`, `(γ, b₁, b₂, ψ)` or `γ`.
    #[must_use]
    pub fn node_dim(self) -> usize {
        match self {
            Self::Pyramid => 6,
            Self::Cone => 4,
            Self::Frictionless => 1,
        }
    }
}

/// The Jordan product `u ∘ w = Arw(u) w` of the second-order cone.
#[inline]
#[must_use]
pub fn jordan(u: &Vector3<f64>, w: &Vector3<f64>) -> Vector3<f64> {
    Vector3::new(u.dot(w), u.x * w.y + w.x * u.y, u.x * w.z + w.x * u.z)
}

/// `det(u) = u₀² − ‖ū‖²` (positive inside the cone and its negative).
#[inline]
#[must_use]
pub fn cone_det(u: &Vector3<f64>) -> f64 {
    u.x * u.x - u.y * u.y - u.z * u.z
}

/// The largest `α > 0` with `u + α d` in the cone `Q`, for `u` in its interior (`f64::INFINITY`
/// when the ray never leaves it). `det(u + α d) = a α² + 2 b α + c` with `a = det(d)`,
/// `b = u₀d₀ − ūᵀd̄`, `c = det(u) > 0`: the ray leaves `Q` at the first positive root of `det`
/// (computed without cancellation) or, when it runs through the apex (a double root, which
/// round-off may turn into none), where its first component `u₀ + α d₀` vanishes.
#[must_use]
pub fn step_to_boundary(u: &Vector3<f64>, d: &Vector3<f64>) -> f64 {
    let (a, b, c) = (cone_det(d), u.x * d.x - u.y * d.y - u.z * d.z, cone_det(u));
    let smallest_positive = |r: f64| if r > 0.0 { r } else { f64::INFINITY };
    let apex = if d.x < 0.0 { -u.x / d.x } else { f64::INFINITY };
    let disc = b * b - a * c;
    if disc < 0.0 {
        return apex; // no real root: det keeps the sign of c > 0
    }
    let q = -(b + b.signum() * disc.sqrt());
    let r1 = if a != 0.0 { smallest_positive(q / a) } else { f64::INFINITY };
    let r2 = if q != 0.0 { smallest_positive(c / q) } else { f64::INFINITY };
    r1.min(r2).min(apex)
}

/// The cone's primal `x = (c_f γ, b)` from the node unknowns `y = (γ, b₁, b₂, ψ, …)`.
#[inline]
#[must_use]
pub fn primal(friction: f64, y: &nalgebra::Vector6<f64>) -> Vector3<f64> {
    Vector3::new(friction * y[0], y[1], y[2])
}

/// The cone's dual `z = (ψ, z̄)`.
#[inline]
#[must_use]
pub fn dual(y: &nalgebra::Vector6<f64>, zt: &Vector2<f64>) -> Vector3<f64> {
    Vector3::new(y[3], zt.x, zt.y)
}

/// The residual of cone contact `c` into `cw.res[c]` (`[r_a, r_b, r_c (2), r_cc (3)]`, module
/// docs) at the gap `phi` and tangential velocities `bz = (B₁ż, B₂ż)`, barrier `mu`; returns
/// `(½|W r|², max |W r|)` with the weights `(Δt, Δt/p)` of velocity and force·velocity rows
/// (the gap row has weight 1, the complementarities `Δt/p` as for the pyramid).
pub(crate) fn residual(cw: &mut ContactWorkspace, c: usize, friction: f64, phi: f64, bz: (f64, f64), mu: f64, (wv, wf): (f64, f64)) -> (f64, f64) {
    let (y, s, zt) = (cw.y[c], cw.s[c], cw.zt[c]);
    let xz = jordan(&primal(friction, &y), &dual(&y, &zt));
    let r = [s - phi, y[0] * s - mu, zt.x - bz.0, zt.y - bz.1, xz.x - mu, xz.y, xz.z];
    let weights = [1.0, wf, wv, wv, wf, wf, wf];
    let (mut merit, mut max) = (0.0, 0.0_f64);
    for (x, w) in r.iter().zip(weights) {
        merit += (x * w) * (x * w);
        max = max.max((x * w).abs());
    }
    cw.res[c][..7].copy_from_slice(&r);
    (0.5 * merit, max)
}

/// The Newton blocks of cone contact `c` (node `(γ, b₁, b₂, ψ)`, rows `[gap; cone (3)]`):
/// the pivot `[[s, 0, 0, 0], [c_f z, Arw(z)_{:,1:3}, x]]`, the block on the body's velocity
/// `[γ ∂φ/∂ż; Arw(x)(0, B)]`, the body's block `[−N, −B₁, −B₂, 0]` and the negated condensed
/// right-hand side `[r_b − γ r_a; r_cc − Arw(x)(0, r_c)]` (module docs); `grad_phi = ∂φ/∂ż`
/// of the contact's first (`side = 0`) or second body, whose blocks these are.
pub(crate) fn newton_blocks(
    cw: &ContactWorkspace,
    c: usize,
    friction: f64,
    grad_phi: &Vector6<f64>,
    side: usize,
) -> (Matrix6<f64>, Matrix6<f64>, Matrix6<f64>, Vector6<f64>) {
    let (y, s, r) = (cw.y[c], cw.s[c], &cw.res[c]);
    let (n_now, bt) = cw.wrenches(c, side);
    let (x, z) = (primal(friction, &y), dual(&y, &cw.zt[c]));
    let mut d = Matrix6::zeros();
    d[(0, 0)] = s;
    let mut row = Matrix6::zeros();
    row.set_row(0, &(grad_phi.transpose() * y[0]));
    for k in 0..3 {
        d[(1 + k, 0)] = friction * z[k];
        d[(1 + k, 3)] = x[k];
    }
    d[(1, 1)] = z.y;
    d[(1, 2)] = z.z;
    d[(2, 1)] = z.x;
    d[(3, 2)] = z.x;
    row.set_row(1, &(bt[0] * x.y + bt[2] * x.z).transpose());
    row.set_row(2, &(bt[0] * x.x).transpose());
    row.set_row(3, &(bt[2] * x.x).transpose());
    let cc = Vector3::new(r[4], r[5], r[6]) - jordan(&x, &Vector3::new(0.0, r[2], r[3]));
    let mut col = Matrix6::zeros();
    col.set_column(0, &(-n_now));
    col.set_column(1, &(-bt[0]));
    col.set_column(2, &(-bt[2]));
    let rhs = Vector6::new(r[1] - y[0] * r[0], cc.x, cc.y, cc.z, 0.0, 0.0);
    (d, row, col, rhs)
}

/// The largest step along the direction `dy` of cone contact `c` (and the recovered `δz̄`)
/// that keeps `x` and `z` in the cone ([`step_to_boundary`]; the caller applies `τ`).
pub(crate) fn largest_step(cw: &ContactWorkspace, c: usize, friction: f64, dy: &Vector6<f64>) -> f64 {
    let (y, zt) = (cw.y[c], cw.zt[c]);
    let ax = step_to_boundary(&primal(friction, &y), &primal(friction, dy));
    let az = step_to_boundary(&dual(&y, &zt), &dual(dy, &cw.dzt[c]));
    ax.min(az)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_common::contact::{box_on_ground, box_with};
    use crate::MaximalIntegrator;
    use std::sync::Arc;

    #[test]
    fn step_to_boundary_lands_on_the_cone_and_not_before() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut hits = 0;
        for _ in 0..2000 {
            let ubar = Vector2::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0));
            let u = Vector3::new(ubar.norm() + rng.random_range(1e-3..1.0), ubar.x, ubar.y);
            let d = Vector3::new(rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0));
            let alpha = step_to_boundary(&u, &d);
            let inside = |t: f64| {
                let p = u + d * t;
                p.x >= (p.y * p.y + p.z * p.z).sqrt()
            };
            if alpha.is_finite() {
                hits += 1;
                let p = u + d * alpha;
                // on the boundary (relative to the point's size), inside just before, outside after
                assert!(cone_det(&p).abs() <= 1e-9 * (1.0 + p.norm_squared()), "det {} at α = {alpha}", cone_det(&p));
                assert!(p.x >= -1e-12, "reached −Q");
                assert!(inside(alpha * (1.0 - 1e-9)) && !inside(alpha * (1.0 + 1e-6) + 1e-12), "α = {alpha} is not the exit");
            } else {
                for t in [1.0, 10.0, 1e3, 1e6] {
                    assert!(inside(t), "never leaves, yet outside at t = {t}");
                }
            }
        }
        assert!(hits > 500, "too few rays leave the cone: {hits}");
        // along the axis towards the apex (a double root of det): it stops at the apex
        let alpha = step_to_boundary(&Vector3::new(2.0, 0.0, 0.0), &Vector3::new(-1.0, 0.0, 0.0));
        assert!((alpha - 2.0).abs() < 1e-15, "axis ray: α = {alpha}");
        let alpha = step_to_boundary(&Vector3::new(2.0, 0.1, 0.0), &Vector3::new(-1.0, -0.05, 0.0));
        assert!((alpha - 2.0).abs() < 1e-12, "ray through the apex: α = {alpha}");
    }

    #[test]
    fn jordan_product_is_the_arrow_matrix_and_commutes() {
        let (u, w) = (Vector3::new(2.0, 0.5, -1.0), Vector3::new(1.5, -0.3, 0.7));
        let arw = nalgebra::Matrix3::new(u.x, u.y, u.z, u.y, u.x, 0.0, u.z, 0.0, u.x);
        assert!((jordan(&u, &w) - arw * w).amax() < 1e-15);
        assert!((jordan(&u, &w) - jordan(&w, &u)).amax() < 1e-15);
        // e is the identity
        assert_eq!(jordan(&u, &Vector3::x()), u);
    }

    #[test]
    fn cone_needs_a_positive_friction_coefficient() {
        let mut mech = box_on_ground(0.0);
        let err = mech.set_friction_model(0, FrictionModel::Cone).unwrap_err().to_string();
        assert!(err.contains("corner0") && err.contains("friction > 0") && err.contains("'cone'"), "{err}");
        assert!(mech.set_friction_model(8, FrictionModel::Cone).unwrap_err().to_string().contains("contact = 8"));
        assert_eq!(FrictionModel::from_name("cone"), Some(FrictionModel::Cone));
        assert_eq!(FrictionModel::from_name("cones"), None);
        let vi = MaximalIntegrator::new(Arc::new(box_with(0.4, FrictionModel::Cone)), 0.01).unwrap();
        assert_eq!(vi.workspace().solver.dim(vi.contact_node(0)), 4);
    }
}
