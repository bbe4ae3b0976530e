//! Contacts between two bodies: a shape on each ([`crate::geometry`]), the signed distance
//! `φ(z_A, z_B) ≥ 0` between them, with friction — the two-body form of the sphere–plane
//! contacts of [`crate::contact`] (Brüdigam et al. 2023, §3.3: "both bodies share β and use
//! flipped b_i"), solved by the same interior point.
//!
//! **Forces.** At `z_k` the shapes' proximity gives the normal `n` (from `B` to `A`), the contact
//! point `P` (the middle of the witness points) and the tangents `t₁, t₂` of `n`
//! ([`crate::constraint::orthonormal_complement`]). A world force `f = n γ + Σ d_i β_i` acts on
//! `A` at `P` and `−f` on `B` at `P`: the wrenches are
//! `N_A = [n; R_Aᵀ((P − x_A) × n)]`, `N_B = −[n; R_Bᵀ((P − x_B) × n)]` (and so for `d_i`).
//! `N_A`, `N_B` are the gradient of `φ` at `z_k` (the envelope theorem, [`crate::geometry`]),
//! as for joints and plane contacts the constraint force is along the Jacobian at the known
//! knot; the forces are equal and opposite at one world point, so the contact exchanges
//! linear and angular momentum between the bodies without changing their sums.
//!
//! **Rows.** `s − φ(z_{k+1}) = 0` with `∂φ/∂ż` of both bodies, and the friction rows of the
//! pyramid or the cone with the relative velocity of the contact point over the step,
//! `B_i ż = B_{A,i} ż_A + B_{B,i} ż_B = d_iᵀ(v_A + R_Aω_A × (P − x_A) − v_B − R_Bω_B × (P − x_B))`.
//!
//! **Graph.** The contact's node (the same 6-, 4- or 1-dimensional node as a plane contact's) is
//! adjacent to both bodies, so it closes a loop through them, and it is ordered as a loop joint
//! is ([`crate::graph::elimination_order_with_loops`]): right before the lowest common ancestor
//! of its bodies, or last when they lie in different trees (free bodies), so that its fill
//! runs along the cycle only. A plane contact is a leaf eliminated first; a body contact must
//! not be: near convergence its pivot holds the barrier's `μ`-small slacks, and eliminated
//! before its bodies the huge Schur complements it leaves on them cancel catastrophically (a
//! sticking capsule pair's graph solve differed from a dense LU by 4× the solution), while
//! eliminated after them its pivot is the well-scaled complement `D + γ ∇φ M⁻¹ Nᵀ + …`.

use crate::body::Pose;
use crate::error::{MaximalError, Result};
use crate::friction_cone::FrictionModel;
use crate::geometry::{proximity, supported, Proximity, Shape};
use crate::mechanism::Mechanism;
use nalgebra::Vector3;

/// A contact between `shapes[0]` on body `bodies[0]` (`A`) and `shapes[1]` on `bodies[1]`
/// (`B`), shapes in the bodies' maximal (centre-of-mass) frames.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyContact {
    pub name: String,
    pub bodies: [usize; 2],
    pub shapes: [Shape; 2],
    /// Friction coefficient `c_f ≥ 0`.
    pub friction: f64,
    /// The 4-direction pyramid (default) or the isotropic cone ([`crate::friction_cone`]).
    pub friction_model: FrictionModel,
}

/// The contact frame at one configuration: proximity, contact point and tangents.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContactFrame {
    pub prox: Proximity,
    pub point: Vector3<f64>,
    pub tangents: [Vector3<f64>; 2],
}

impl BodyContact {
    /// The signed distance `φ` of the shapes with the bodies at `poses` (negative: overlap).
    #[must_use]
    pub fn distance(&self, poses: &[Pose]) -> f64 {
        self.frame(poses).prox.distance
    }

    /// The shapes placed at `poses` and their proximity, contact point and tangents.
    pub(crate) fn frame(&self, poses: &[Pose]) -> ContactFrame {
        let [a, b] = self.bodies;
        let prox = proximity(&self.shapes[0].placed(&poses[a]), &self.shapes[1].placed(&poses[b])).expect("pairs are checked when added");
        let (t1, t2) = crate::constraint::orthonormal_complement(&prox.normal);
        ContactFrame { prox, point: prox.midpoint(), tangents: [t1, t2] }
    }
}

impl Mechanism {
    /// Adds a contact between shape `a.1` on body `a.0` and shape `b.1` on body `b.0` (shapes in
    /// the bodies' minimal-coordinate frames, like [`crate::Sphere`] in [`Self::add_contact`]);
    /// `friction` is the Coulomb coefficient (linearised cone, 4 directions; for the isotropic
    /// cone follow with [`Self::set_body_contact_friction_model`]; `0` gives
    /// [`FrictionModel::Frictionless`]). Pairs: sphere–sphere,
    /// sphere–capsule, capsule–capsule, sphere–box ([`crate::geometry::supported`]).
    pub fn add_body_contact(&mut self, name: &str, a: (usize, Shape), b: (usize, Shape), friction: f64) -> Result<usize> {
        let bad = |what: String| Err(MaximalError::InvalidParameter(format!("body contact '{name}': {what}")));
        let nb = self.nbodies();
        for (which, (body, shape)) in [("first", a), ("second", b)] {
            if body >= nb {
                return bad(format!("{which} body = {body} is out of range (the mechanism has {nb} bodies)"));
            }
            if !shape.is_valid() {
                return bad(format!("the {which} shape ({shape:?}) has non-finite entries, a negative size or a non-rotation"));
            }
        }
        if a.0 == b.0 {
            return bad(format!("both shapes are on body {}; a contact needs two bodies", a.0));
        }
        if !supported(&a.1, &b.1) {
            return bad(format!("{}–{} contacts are not implemented (sphere–sphere, sphere–capsule, capsule–capsule, sphere–box are)", a.1.kind(), b.1.kind()));
        }
        if !(friction >= 0.0 && friction.is_finite()) {
            return bad(format!("friction = {friction}; expected a finite number ≥ 0"));
        }
        let to_com = |(body, shape): (usize, Shape)| shape.transformed(&nalgebra::Matrix3::identity(), &-self.com[body]);
        let shapes = [to_com(a), to_com(b)];
        self.body_contacts.push(BodyContact {
            name: name.to_string(),
            bodies: [a.0, b.0],
            shapes,
            friction,
            friction_model: if friction == 0.0 { FrictionModel::Frictionless } else { FrictionModel::Pyramid },
        });
        Ok(self.body_contacts.len() - 1)
    }

    /// Sets the friction model of body contact `contact` (as [`Self::set_friction_model`]; the
    /// pyramid and the cone need `friction > 0`).
    pub fn set_body_contact_friction_model(&mut self, contact: usize, model: FrictionModel) -> Result<()> {
        let n = self.body_contacts.len();
        let Some(ct) = self.body_contacts.get_mut(contact) else {
            return Err(MaximalError::InvalidParameter(format!("body contact = {contact} is out of range (the mechanism has {n} body contacts)")));
        };
        if model != FrictionModel::Frictionless && ct.friction <= 0.0 {
            return Err(MaximalError::InvalidParameter(format!(
                "body contact '{}': friction_model = '{}' needs friction > 0 (got {}): the friction cone has no interior at 0",
                ct.name,
                model.name(),
                ct.friction
            )));
        }
        ct.friction_model = model;
        Ok(())
    }
}

impl crate::integrator::MaximalIntegrator {
    /// The body contacts' parts of `∂R/∂x` for the linearisation (as
    /// [`Self::inequality_jacobian`] for plane contacts, added into `rx`). With `y` the columns
    /// `[δx_A, δθ_A, δx_B, δθ_B]` at `z_k`, `∂n`, `∂P` from [`crate::geometry::proximity_jacobian`],
    /// `t₁ = m/|m|`, `m = n × e_k` (the fixed axis `e_k` of
    /// [`crate::constraint::orthonormal_complement`]): `∂t₁ = (I − t₁t₁ᵀ)/|m| · (−[e_k]×) ∂n`,
    /// `∂t₂ = −[t₁]× ∂n + [n]× ∂t₁`; with the world force `f = nγ + t₁c₁ + t₂c₂`
    /// (pyramid `c₁ = β₁ − β₂`, `c₂ = β₃ − β₄`; cone `c = b`):
    /// * body rows: `−∂W/∂y` of `W = ±[f; Rᵀ((P − x) × f)]`, with
    ///   `∂(Rᵀ((P − x) × f)) = Rᵀ(−[f]×(∂P − ∂x) + [P − x]× ∂f) + [Rᵀ((P − x) × f)]× ∂θ`;
    /// * gap row: `γ ∂φ(z₊)/∂y` with `δz₊ = (δx, R(w)ᵀδθ)` per body;
    /// * friction rows: the derivative of `t_iᵀ u` with the contact point's relative velocity
    ///   `u = Σ ±(v + Rω × (P − x))`, `∂u = Σ ±([P − x]× R[ω]× ∂θ + [Rω]×(∂P − ∂x))`, condensed
    ///   like the plane contact's rows (pyramid `β_i ∂(d_iᵀu)`, cone `Arw(x)(0, ∂(Bż))`).
    ///
    /// Needs the first derivatives of the contact frame ([`crate::geometry::proximity_jacobian`]),
    /// which are not defined at parallel capsules, touching cores or a sphere centred on a
    /// box's face (`NotYet` there).
    pub(crate) fn body_contact_jacobian(&self, ws: &crate::integrator::MaximalWorkspace, rx: &mut nalgebra::DMatrix<f64>, offsets: &[usize]) -> Result<()> {
        use nalgebra::{Matrix3, SMatrix};
        use vidyn_spatial::skew;
        type Jac = SMatrix<f64, 3, 12>;
        let mech = &**self.mechanism();
        let dt = self.dt();
        let nc = mech.contacts.len();
        let step_rot = |w: &Vector3<f64>| crate::body::step_quaternion(w, dt).map_or(Matrix3::identity(), |q| q.to_rotation_matrix().into_inner());
        for (k, bc) in mech.body_contacts.iter().enumerate() {
            let c = nc + k;
            let node = self.contact_node(c);
            let now = ws.now_poses();
            let [a, b] = bc.bodies;
            let frame = bc.frame(now);
            let Some((jn, jp)) = crate::geometry::proximity_jacobian(&bc.shapes[0], &now[a], &bc.shapes[1], &now[b]) else {
                return Err(MaximalError::NotYet(
                    "the linearisation of a body contact at parallel capsules, touching cores or a sphere centred on a box's surface",
                ));
            };
            let (n, p, [t1, t2]) = (frame.prox.normal, frame.point, frame.tangents);
            // the tangents' derivatives (orthonormal_complement's fixed axis e_k)
            let axis = (0..3).min_by(|&i, &j| n[i].abs().total_cmp(&n[j].abs())).unwrap_or(0);
            let m = n.cross(&Vector3::ith(axis, 1.0));
            let jt1: Jac = (Matrix3::identity() - t1 * t1.transpose()) / m.norm() * (-skew(&Vector3::ith(axis, 1.0))) * jn;
            let jt2: Jac = -skew(&t1) * jn + skew(&n) * jt1;
            let y = ws.ct.y[c];
            let (c1, c2) = match bc.friction_model {
                FrictionModel::Pyramid => (y[1] - y[2], y[3] - y[4]),
                FrictionModel::Cone => (y[1], y[2]),
                FrictionModel::Frictionless => (0.0, 0.0),
            };
            let f = n * y[0] + t1 * c1 + t2 * c2;
            let jf: Jac = jn * y[0] + jt1 * c1 + jt2 * c2;
            // selectors of δx and δθ of each side, and the relative velocity's derivative
            let select = |side: usize, rot: bool| {
                let mut e = Jac::zeros();
                e.fixed_view_mut::<3, 3>(0, 6 * side + if rot { 3 } else { 0 }).copy_from(&Matrix3::identity());
                e
            };
            let mut u = Vector3::zeros();
            let mut ju = Jac::zeros();
            let next_grad =
                crate::geometry::distance_gradient(&bc.frame(&ws.next).prox, (&ws.next[a].x, &ws.next[a].rotation()), (&ws.next[b].x, &ws.next[b].rotation()));
            for (side, body) in [a, b].into_iter().enumerate() {
                let sign = if side == 0 { 1.0 } else { -1.0 };
                let (x, r) = (now[body].x, now[body].rotation());
                let arm = p - x;
                let (ex, eth) = (select(side, false), select(side, true));
                // body rows: −∂W/∂y
                let dforce: Jac = jf * sign;
                let dmoment: Jac = (r.transpose() * (-skew(&f) * (jp - ex) + skew(&arm) * jf) + skew(&(r.transpose() * arm.cross(&f))) * eth) * sign;
                for col in 0..12 {
                    let gc = if col < 6 { 12 * a + col } else { 12 * b + col - 6 };
                    for row in 0..3 {
                        rx[(offsets[body] + row, gc)] -= dforce[(row, col)];
                        rx[(offsets[body] + 3 + row, gc)] -= dmoment[(row, col)];
                    }
                }
                // gap row: γ ∂φ(z₊)/∂x at fixed ż_k
                let gth = step_rot(&ws.w[body]) * Vector3::new(next_grad[6 * side + 3], next_grad[6 * side + 4], next_grad[6 * side + 5]);
                for kk in 0..3 {
                    rx[(offsets[node], 12 * body + kk)] += y[0] * next_grad[6 * side + kk];
                    rx[(offsets[node], 12 * body + 3 + kk)] += y[0] * gth[kk];
                }
                let rw = r * ws.w[body];
                u += (ws.v[body] + rw.cross(&arm)) * sign;
                ju += (skew(&arm) * r * skew(&ws.w[body]) * eth + skew(&rw) * (jp - ex)) * sign;
            }
            let g1 = jt1.transpose() * u + ju.transpose() * t1;
            let g2 = jt2.transpose() * u + ju.transpose() * t2;
            let mut rows = [SMatrix::<f64, 12, 1>::zeros(); 4];
            let n_rows = match bc.friction_model {
                FrictionModel::Pyramid => {
                    for (i, g) in [g1, -g1, g2, -g2].iter().enumerate() {
                        rows[i] = g * y[1 + i];
                    }
                    4
                }
                FrictionModel::Cone => {
                    let x = crate::friction_cone::primal(bc.friction, &y);
                    rows[0] = g1 * x.y + g2 * x.z;
                    rows[1] = g1 * x.x;
                    rows[2] = g2 * x.x;
                    3
                }
                FrictionModel::Frictionless => 0,
            };
            for (i, g) in rows.iter().take(n_rows).enumerate() {
                for col in 0..12 {
                    let gc = if col < 6 { 12 * a + col } else { 12 * b + col - 6 };
                    rx[(offsets[node] + 1 + i, gc)] += g[col];
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
