//! Inequality constraints — point/sphere contacts with a plane (friction on a linearised cone, or
//! on the isotropic second-order cone of [`crate::friction_cone`]) and joint position limits
//! ([`JointLimit`]; not in the papers, handled the same way) — solved by a primal-dual
//! interior-point method on the graph solver (Brüdigam et al. 2023, §3.3–3.4, eqs. 22–29 and
//! Appendix D; Nocedal & Wright 2006, Alg. 19.1).
//!
//! A contact is a sphere of radius `r` centred at point `p` of a body (frame of the body's
//! centre of mass) against the world plane `nᵀy = h`. With `z_{k+1} = z_k ⊕ Δt ż_k`:
//! * gap `φ = nᵀ(x + R p) − r − h ≥ 0` at `z_{k+1}`, normal force `γ ≥ 0`, `γ φ = 0`;
//! * friction forces `β_i ≥ 0` along the four tangent directions `±t₁, ±t₂`, cone
//!   `c_f γ − Σβ ≥ 0`, maximum dissipation: `B_i ż + ψ − η_i = 0`, `η ∘ β = 0`,
//!   `ψ (c_f γ − Σβ) = 0`, with `B_i ż` the velocity of the contact point along direction `i`
//!   (at `z_k`, the velocity of the step).
//!
//! The body receives the wrench `N γ + Σ B_i β_i`, `N = [n; p × Rᵀn]`, `B_i = [d_i; p × Rᵀd_i]`
//! (world force, body moment, at `z_k` like the joint forces). With slacks `s = φ`,
//! `σ = c_f γ − Σβ` the complementarities are relaxed to `= μ`; each Newton system eliminates
//! `s`, `η`, `σ` (they enter one equation each, linearly) so a contact is one 6-dimensional
//! graph node `(γ, β₁…β₄, ψ)`, a leaf of its body, eliminated first:
//! `s δγ + γ δφ = −r_b + γ r_a`, `η_i δβ_i + β_i (B_i δż + δψ) = −r_d,i − β_i r_c,i`,
//! `ψ (c_f δγ − Σδβ) + σ δψ = −r_f + ψ r_e`. Its pivot block is nonsingular whenever
//! `s, η, σ > 0`, which the fraction-to-the-boundary rule keeps. A frictionless contact
//! ([`FrictionModel::Frictionless`]) keeps only `γ` and the rows `r_a`, `r_b`: a 1-dimensional
//! node with pivot `s`. Contacts between two bodies ([`crate::body_contact`]) use the same rows
//! with the gap and the wrenches of both bodies; their nodes touch both.
//!
//! **Solver** (constants after the papers' reference implementation): all positive variables start
//! at 1 every step (a cone contact: `γ = ψ = 1`, `b = z̄ = 0`), `μ₀ = 1`; after each iteration
//! `μ ← μ/10` while the `μ`-residual is below `10 μ` (weighted), but not below the `μ` whose weighted
//! complementarity is a tenth of the tolerance (IPOPT's floor, Wächter & Biegler 2006: a smaller
//! `μ` buys no accuracy and costs sticking contacts' pivots their conditioning); fraction to the
//! boundary `τ = 0.95`; backtracking (at most 10 halvings) on the weighted residual norm; converged
//! when the unperturbed (`μ = 0`) weighted residual is below `100 · tolerance` (complementarity
//! cannot be driven to round-off at a useful cost), at most `max(max_iterations, 100)` iterations.

use crate::body::{update_tangent, BodyState};
use crate::error::{MaximalError, Result};
use crate::friction_cone::FrictionModel;
use crate::integrator::{MaximalIntegrator, MaximalWorkspace, StepStats};
use crate::mechanism::Mechanism;
use nalgebra::{Matrix6, Vector2, Vector3, Vector4, Vector6};

/// A sphere on a body: its `centre` in the body's minimal-coordinate frame, and its `radius`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sphere {
    pub centre: Vector3<f64>,
    pub radius: f64,
}

/// The world plane `nᵀy = h`: unit `normal` `n` and `offset` `h`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plane {
    pub normal: Vector3<f64>,
    pub offset: f64,
}

impl Plane {
    /// The ground `z = 0`, normal `+z`.
    #[must_use]
    pub fn ground() -> Self {
        Self { normal: Vector3::z(), offset: 0.0 }
    }
}

/// A sphere on a body against a world plane.
#[derive(Clone, Debug, PartialEq)]
pub struct Contact {
    pub name: String,
    pub body: usize,
    /// Sphere centre in the body's maximal (centre-of-mass) frame.
    pub point: Vector3<f64>,
    pub radius: f64,
    /// Unit plane normal (world) and offset `h`: the plane is `nᵀy = h`.
    pub normal: Vector3<f64>,
    pub offset: f64,
    /// Friction coefficient `c_f ≥ 0`.
    pub friction: f64,
    /// Tangent directions `t₁, t₂` (world).
    pub tangents: [Vector3<f64>; 2],
    /// The 4-direction pyramid (default) or the isotropic cone ([`crate::friction_cone`]).
    pub friction_model: FrictionModel,
}

impl Contact {
    /// Friction directions `d = (t₁, −t₁, t₂, −t₂)`.
    #[inline]
    fn directions(&self) -> [Vector3<f64>; 4] {
        let [t1, t2] = self.tangents;
        [t1, -t1, t2, -t2]
    }
}

/// Position limits `lower ≤ θ ≤ upper` of a 1-dof model joint (revolute angle or prismatic
/// displacement), two inequalities handled like contacts: `φ_lo = θ(z_{k+1}) − lower ≥ 0`,
/// `φ_hi = upper − θ(z_{k+1}) ≥ 0`, with the forces `γ_lo − γ_hi` acting as a generalised force
/// on the joint (the wrench of a unit joint force, [`Mechanism::joint_wrench_jacobians`], is
/// the gradient of `θ` on the joint's manifold). One 2-dimensional graph node per limit,
/// eliminated first (it fills in one block between the joint's two bodies).
#[derive(Clone, Debug, PartialEq)]
pub struct JointLimit {
    pub joint: usize,
    pub lower: f64,
    pub upper: f64,
}

impl Mechanism {
    /// Adds position limits to the 1-dof model joint `joint` (index into `joints`).
    pub fn add_joint_limit(&mut self, joint: usize, lower: f64, upper: f64) -> Result<usize> {
        let ok = self.joints.get(joint).and_then(|j| j.minimal).is_some_and(|(mj, _)| mj.nv() == 1);
        if !ok {
            return Err(MaximalError::InvalidMechanism(format!("joint limit on joint {joint}: needs a revolute or prismatic model joint")));
        }
        if !(lower.is_finite() && upper.is_finite() && lower < upper) {
            return Err(MaximalError::InvalidParameter(format!("joint limit on joint {joint}: lower = {lower}, upper = {upper}; expected finite bounds with lower < upper (for a one-sided limit give the other bound beyond the motion's range)")));
        }
        self.limits.push(JointLimit { joint, lower, upper });
        Ok(self.limits.len() - 1)
    }

    /// Adds a contact between `sphere` on body `body` and the world `plane`; `friction` is
    /// the Coulomb coefficient (linearised cone, 4 directions; for the
    /// isotropic cone follow with [`Self::set_friction_model`]).
    pub fn add_contact(&mut self, name: &str, body: usize, sphere: Sphere, plane: Plane, friction: f64) -> Result<usize> {
        let (Sphere { centre: point, radius }, Plane { normal, offset }) = (sphere, plane);
        let bad = |what: String| Err(MaximalError::InvalidParameter(format!("contact '{name}': {what}")));
        if body >= self.nbodies() {
            return bad(format!("body = {body} is out of range (the mechanism has {} bodies)", self.nbodies()));
        }
        if !point.iter().all(|x| x.is_finite()) {
            return bad(format!("point = [{}, {}, {}] is not finite", point.x, point.y, point.z));
        }
        for (arg, value) in [("radius", radius), ("friction", friction)] {
            if !(value >= 0.0 && value.is_finite()) {
                return bad(format!("{arg} = {value}; expected a finite number ≥ 0"));
            }
        }
        if !offset.is_finite() {
            return bad(format!("offset = {offset}; expected a finite number"));
        }
        if (normal.norm() - 1.0).abs() > 1e-9 || !normal.norm().is_finite() {
            return bad(format!("normal = [{}, {}, {}] has norm {}; expected a unit vector", normal.x, normal.y, normal.z, normal.norm()));
        }
        let (t1, t2) = crate::constraint::orthonormal_complement(&normal);
        self.contacts.push(Contact {
            name: name.to_string(),
            body,
            point: point - self.com[body],
            radius,
            normal,
            offset,
            friction,
            tangents: [t1, t2],
            friction_model: FrictionModel::Pyramid,
        });
        Ok(self.contacts.len() - 1)
    }

    /// Sets the friction model of contact `contact` (added with the pyramid): the cone needs a
    /// friction coefficient `> 0` (the cone `‖b‖ ≤ 0` of a frictionless contact has no
    /// interior for the interior point).
    pub fn set_friction_model(&mut self, contact: usize, model: FrictionModel) -> Result<()> {
        let n = self.contacts.len();
        let Some(ct) = self.contacts.get_mut(contact) else {
            return Err(MaximalError::InvalidParameter(format!("contact = {contact} is out of range (the mechanism has {n} contacts)")));
        };
        if model == FrictionModel::Cone && ct.friction <= 0.0 {
            return Err(MaximalError::InvalidParameter(format!(
                "contact '{}': friction_model = '{}' needs friction > 0 (got {}): the cone |b| <= friction * normal force has no interior at 0",
                ct.name,
                model.name(),
                ct.friction
            )));
        }
        ct.friction_model = model;
        Ok(())
    }
}

/// Bodies (the second for a body contact), friction coefficient and friction model of one
/// contact, as the interior point sees it ([`MaximalIntegrator::contact_info`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContactInfo {
    pub body: usize,
    pub other: Option<usize>,
    pub friction: f64,
    pub model: FrictionModel,
}

/// Interior-point variables and scratch of every contact.
#[derive(Clone, Debug, Default)]
pub struct ContactWorkspace {
    /// The graph unknowns per contact: `(γ, β₁…β₄, ψ)` (pyramid) or `(γ, b₁, b₂, ψ, 0, 0)` (cone).
    pub y: Vec<Vector6<f64>>,
    /// Slacks `s` (gap); pyramid: duals `η`, slacks `σ`; cone: tangential slack `z̄`.
    pub s: Vec<f64>,
    pub eta: Vec<Vector4<f64>>,
    pub sigma: Vec<f64>,
    pub zt: Vec<Vector2<f64>>,
    y_base: Vec<Vector6<f64>>,
    s_base: Vec<f64>,
    eta_base: Vec<Vector4<f64>>,
    sigma_base: Vec<f64>,
    zt_base: Vec<Vector2<f64>>,
    /// `N` and `B_i` at `z_k` (wrench per unit force along `n`, `t₁, −t₁, t₂, −t₂`); for a
    /// body contact those on its first body, `n_now_b`, `b_now_b` those on its second.
    pub(crate) n_now: Vec<Vector6<f64>>,
    pub(crate) b_now: Vec<[Vector6<f64>; 4]>,
    pub(crate) n_now_b: Vec<Vector6<f64>>,
    pub(crate) b_now_b: Vec<[Vector6<f64>; 4]>,
    /// Residual per contact: pyramid `[r_a, r_b, r_c (4), r_d (4), r_e, r_f]`; cone
    /// `[r_a, r_b, r_c (2), r_cc (3)]` ([`crate::friction_cone`]).
    pub(crate) res: Vec<[f64; 12]>,
    /// Recovered directions `(δs, δη, δσ)`, cone `δz̄`.
    pub(crate) ds: Vec<f64>,
    deta: Vec<Vector4<f64>>,
    dsigma: Vec<f64>,
    pub(crate) dzt: Vec<Vector2<f64>>,
    pub mu: f64,
    /// Joint limits: forces `(γ_lo, γ_hi)`, slacks, their line-search bases, directions of
    /// the slacks, residuals `[r_a lo, r_a hi, r_b lo, r_b hi]`, and the wrenches of a unit
    /// joint force at `z_k` (parent, child).
    pub lim_y: Vec<nalgebra::Vector2<f64>>,
    pub lim_s: Vec<nalgebra::Vector2<f64>>,
    lim_y_base: Vec<nalgebra::Vector2<f64>>,
    lim_s_base: Vec<nalgebra::Vector2<f64>>,
    lim_ds: Vec<nalgebra::Vector2<f64>>,
    lim_res: Vec<[f64; 4]>,
    lim_w_now: Vec<(Vector6<f64>, Vector6<f64>)>,
}

impl ContactWorkspace {
    /// `N` and `B_i` of contact `c` on its first (`side = 0`) or second body.
    #[inline]
    pub(crate) fn wrenches(&self, c: usize, side: usize) -> (&Vector6<f64>, &[Vector6<f64>; 4]) {
        if side == 0 {
            (&self.n_now[c], &self.b_now[c])
        } else {
            (&self.n_now_b[c], &self.b_now_b[c])
        }
    }

    /// Starts contact `c`'s interior-point variables: all positive variables 1 (a cone contact:
    /// `x = (c_f, 0, 0)`, `z = e`, both on the cone's axis).
    fn start(&mut self, c: usize, model: FrictionModel) {
        self.s[c] = 1.0;
        match model {
            FrictionModel::Pyramid => {
                self.y[c] = Vector6::repeat(1.0);
                self.eta[c] = Vector4::repeat(1.0);
                self.sigma[c] = 1.0;
            }
            FrictionModel::Cone => {
                self.y[c] = Vector6::new(1.0, 0.0, 0.0, 1.0, 0.0, 0.0);
                self.zt[c] = Vector2::zeros();
            }
            FrictionModel::Frictionless => self.y[c] = Vector6::new(1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        }
    }

    pub(crate) fn with_limits(mut self, n: usize) -> Self {
        use nalgebra::Vector2;
        self.lim_y = vec![Vector2::zeros(); n];
        self.lim_s = vec![Vector2::zeros(); n];
        self.lim_y_base = vec![Vector2::zeros(); n];
        self.lim_s_base = vec![Vector2::zeros(); n];
        self.lim_ds = vec![Vector2::zeros(); n];
        self.lim_res = vec![[0.0; 4]; n];
        self.lim_w_now = vec![(Vector6::zeros(), Vector6::zeros()); n];
        self
    }

    pub(crate) fn new(n: usize) -> Self {
        Self {
            y: vec![Vector6::zeros(); n],
            s: vec![0.0; n],
            eta: vec![Vector4::zeros(); n],
            sigma: vec![0.0; n],
            zt: vec![Vector2::zeros(); n],
            zt_base: vec![Vector2::zeros(); n],
            dzt: vec![Vector2::zeros(); n],
            y_base: vec![Vector6::zeros(); n],
            s_base: vec![0.0; n],
            eta_base: vec![Vector4::zeros(); n],
            sigma_base: vec![0.0; n],
            n_now: vec![Vector6::zeros(); n],
            b_now: vec![[Vector6::zeros(); 4]; n],
            n_now_b: vec![Vector6::zeros(); n],
            b_now_b: vec![[Vector6::zeros(); 4]; n],
            res: vec![[0.0; 12]; n],
            ds: vec![0.0; n],
            deta: vec![Vector4::zeros(); n],
            dsigma: vec![0.0; n],
            mu: 1.0,
            ..Self::default()
        }
    }
}

/// The wrench `N γ + Σ B_i β_i` (cone: `N γ + B₁ b₁ + B₂ b₂`) of a contact's forces `y`.
#[inline]
fn contact_wrench(model: FrictionModel, n: &Vector6<f64>, b: &[Vector6<f64>; 4], y: &Vector6<f64>) -> Vector6<f64> {
    match model {
        FrictionModel::Pyramid => n * y[0] + b[0] * y[1] + b[1] * y[2] + b[2] * y[3] + b[3] * y[4],
        FrictionModel::Cone => n * y[0] + b[0] * y[1] + b[2] * y[2],
        FrictionModel::Frictionless => n * y[0],
    }
}

/// Weights of the 12 residual rows: lengths 1, velocities Δt, forces and complementarities Δt/p.
fn weights(dt: f64, p_scale: f64) -> [f64; 12] {
    let f = dt / p_scale;
    [1.0, f, dt, dt, dt, dt, f, f, f, f, f, f]
}

impl MaximalIntegrator {
    /// `N`, `B_i` at `z_k` and the interior-point start (all positive variables 1, `μ = 1`).
    pub(crate) fn prepare_contacts(&self, ws: &mut MaximalWorkspace) {
        let mech = &**self.mechanism();
        for (c, ct) in mech.contacts.iter().enumerate() {
            let pose = &ws.now_poses()[ct.body];
            let rt = pose.rotation().transpose();
            let wrench = |d: &Vector3<f64>| {
                let m = ct.point.cross(&(rt * d));
                Vector6::new(d.x, d.y, d.z, m.x, m.y, m.z)
            };
            ws.ct.n_now[c] = wrench(&ct.normal);
            let dirs = ct.directions();
            for i in 0..4 {
                ws.ct.b_now[c][i] = wrench(&dirs[i]);
            }
            ws.ct.start(c, ct.friction_model);
        }
        let nc = mech.contacts.len();
        for (k, bc) in mech.body_contacts.iter().enumerate() {
            let c = nc + k;
            let frame = bc.frame(ws.now_poses());
            let [t1, t2] = frame.tangents;
            let dirs = [t1, -t1, t2, -t2];
            for (side, body) in bc.bodies.into_iter().enumerate() {
                let pose = &ws.now_poses()[body];
                let (rt, arm) = (pose.rotation().transpose(), frame.point - pose.x);
                let sign = if side == 0 { 1.0 } else { -1.0 };
                let wrench = |d: &Vector3<f64>| {
                    let m = rt * arm.cross(d);
                    Vector6::new(d.x, d.y, d.z, m.x, m.y, m.z) * sign
                };
                let (n, b) = if side == 0 { (&mut ws.ct.n_now[c], &mut ws.ct.b_now[c]) } else { (&mut ws.ct.n_now_b[c], &mut ws.ct.b_now_b[c]) };
                *n = wrench(&frame.prox.normal);
                for i in 0..4 {
                    b[i] = wrench(&dirs[i]);
                }
            }
            ws.ct.start(c, bc.friction_model);
        }
        for (l, lim) in mech.limits.iter().enumerate() {
            let (_, (wa, wb)) = mech.joint_wrench_jacobians(lim.joint, ws.now_poses(), &[1.0]);
            ws.ct.lim_w_now[l] = (wa, wb);
            ws.ct.lim_y[l] = nalgebra::Vector2::repeat(1.0);
            ws.ct.lim_s[l] = nalgebra::Vector2::repeat(1.0);
        }
        ws.ct.mu = 1.0;
    }

    /// Subtracts the contact wrenches from the body residuals (called by `evaluate`).
    pub(crate) fn subtract_contact_wrenches(&self, ws: &mut MaximalWorkspace) {
        let mech = &**self.mechanism();
        for (c, ct) in mech.contacts.iter().enumerate() {
            let (n, b) = ws.ct.wrenches(c, 0);
            ws.residual[ct.body] -= contact_wrench(ct.friction_model, n, b, &ws.ct.y[c]);
        }
        let nc = mech.contacts.len();
        for (k, bc) in mech.body_contacts.iter().enumerate() {
            for (side, body) in bc.bodies.into_iter().enumerate() {
                let (n, b) = ws.ct.wrenches(nc + k, side);
                ws.residual[body] -= contact_wrench(bc.friction_model, n, b, &ws.ct.y[nc + k]);
            }
        }
        for (l, lim) in mech.limits.iter().enumerate() {
            let jt = &mech.joints[lim.joint];
            let f = ws.ct.lim_y[l][0] - ws.ct.lim_y[l][1];
            let (wa, wb) = ws.ct.lim_w_now[l];
            ws.residual[jt.child] -= wb * f;
            if let Some(p) = jt.parent {
                ws.residual[p] -= wa * f;
            }
        }
    }

    /// Contact residuals at the current unknowns and `ws.next`, with barrier `mu`; returns
    /// `(½|W r|², max |W r|)` over the contacts.
    pub(crate) fn contact_residuals(&self, ws: &mut MaximalWorkspace, mu: f64, p_scale: f64) -> (f64, f64) {
        let mech = &**self.mechanism();
        let wt = weights(self.dt(), p_scale);
        let zdot = |ws: &MaximalWorkspace, b: usize| Vector6::new(ws.v[b].x, ws.v[b].y, ws.v[b].z, ws.w[b].x, ws.w[b].y, ws.w[b].z);
        // (Σ (w r)², max |w r|) over the rows
        let mut acc = (0.0, 0.0_f64);
        for (c, ct) in mech.contacts.iter().enumerate() {
            let next = &ws.next[ct.body];
            let phi = ct.normal.dot(&next.point(&ct.point)) - ct.radius - ct.offset;
            let zd = zdot(ws, ct.body);
            let b = &ws.ct.b_now[c];
            let bz = [b[0].dot(&zd), b[1].dot(&zd), b[2].dot(&zd), b[3].dot(&zd)];
            self.friction_residual(ws, (c, ct.friction_model, ct.friction), phi, bz, (mu, &wt), &mut acc);
        }
        let nc = mech.contacts.len();
        for (k, bc) in mech.body_contacts.iter().enumerate() {
            let c = nc + k;
            let phi = bc.frame(&ws.next).prox.distance;
            let [a, b] = bc.bodies;
            let (za, zb) = (zdot(ws, a), zdot(ws, b));
            let (ba, bb) = (&ws.ct.b_now[c], &ws.ct.b_now_b[c]);
            let bz = [0, 1, 2, 3].map(|i| ba[i].dot(&za) + bb[i].dot(&zb));
            self.friction_residual(ws, (c, bc.friction_model, bc.friction), phi, bz, (mu, &wt), &mut acc);
        }
        let (mut merit, mut max) = acc;
        let f = self.dt() / p_scale;
        for (l, lim) in mech.limits.iter().enumerate() {
            let th = mech.joint_coordinate(lim.joint, &ws.next).unwrap_or(0.0);
            let (y, s) = (ws.ct.lim_y[l], ws.ct.lim_s[l]);
            let r = [s[0] - (th - lim.lower), s[1] - (lim.upper - th), y[0] * s[0] - mu, y[1] * s[1] - mu];
            for (k, x) in r.iter().enumerate() {
                let x = x * if k < 2 { 1.0 } else { f };
                merit += x * x;
                max = max.max(x.abs());
            }
            ws.ct.lim_res[l] = r;
        }
        (0.5 * merit, max)
    }

    /// The residual of contact `c` into `ws.ct.res[c]` at its gap `phi` (at `z_{k+1}`) and the
    /// velocities `bz = B_i ż` along `t₁, −t₁, t₂, −t₂`, barrier `mu`, row weights `wt`;
    /// adds `|W r|²` (the cone: `½|W r|²`, as before) and `max |W r|` into `acc`.
    fn friction_residual(
        &self,
        ws: &mut MaximalWorkspace,
        (c, model, friction): (usize, FrictionModel, f64),
        phi: f64,
        bz: [f64; 4],
        (mu, wt): (f64, &[f64; 12]),
        acc: &mut (f64, f64),
    ) {
        if model == FrictionModel::Cone {
            let (m, x) = crate::friction_cone::residual(&mut ws.ct, c, friction, phi, (bz[0], bz[2]), mu, (wt[2], wt[1]));
            acc.0 += m;
            acc.1 = acc.1.max(x);
            return;
        }
        if model == FrictionModel::Frictionless {
            let (gamma, s) = (ws.ct.y[c][0], ws.ct.s[c]);
            let r = [s - phi, gamma * s - mu];
            for k in 0..2 {
                let x = r[k] * wt[k];
                acc.0 += x * x;
                acc.1 = acc.1.max(x.abs());
            }
            ws.ct.res[c][..2].copy_from_slice(&r);
            return;
        }
        let (y, s, eta, sigma) = (ws.ct.y[c], ws.ct.s[c], ws.ct.eta[c], ws.ct.sigma[c]);
        let mut r = [0.0; 12];
        r[0] = s - phi;
        r[1] = y[0] * s - mu;
        let mut beta_sum = 0.0;
        for i in 0..4 {
            r[2 + i] = bz[i] + y[5] - eta[i];
            r[6 + i] = eta[i] * y[1 + i] - mu;
            beta_sum += y[1 + i];
        }
        r[10] = sigma - (friction * y[0] - beta_sum);
        r[11] = y[5] * sigma - mu;
        for k in 0..12 {
            let x = r[k] * wt[k];
            acc.0 += x * x;
            acc.1 = acc.1.max(x.abs());
        }
        ws.ct.res[c] = r;
    }

    /// Contact blocks of the Newton matrix and the condensed right-hand sides (negated, as
    /// residual entries of the contact nodes).
    pub(crate) fn assemble_contacts(&self, ws: &mut MaximalWorkspace) {
        let mech = &**self.mechanism();
        let dt = self.dt();
        for c in 0..self.ncontacts() {
            let node = self.contact_node(c);
            let info = self.contact_info(c);
            let grads = self.gap_gradients(ws, c);
            let sides = [Some(info.body), info.other];
            if info.model == FrictionModel::Cone {
                for (side, b) in sides.into_iter().enumerate() {
                    let Some(b) = b else { continue };
                    let (d, row, col, rhs) = crate::friction_cone::newton_blocks(&ws.ct, c, info.friction, &grads[side], side);
                    *ws.solver.diagonal_mut(node) = d;
                    if let Some(blk) = ws.solver.block_mut(node, b) {
                        *blk = row;
                    }
                    if let Some(blk) = ws.solver.block_mut(b, node) {
                        *blk = col;
                    }
                    ws.residual[node] = rhs;
                }
                continue;
            }
            if info.model == FrictionModel::Frictionless {
                // s δγ + γ δφ = −r_b + γ r_a
                let (gamma, s, r) = (ws.ct.y[c][0], ws.ct.s[c], ws.ct.res[c]);
                ws.solver.diagonal_mut(node)[(0, 0)] = s;
                for (side, b) in sides.into_iter().enumerate() {
                    let Some(b) = b else { continue };
                    let mut row = Matrix6::zeros();
                    row.set_row(0, &(grads[side].transpose() * gamma));
                    let mut col = Matrix6::zeros();
                    col.set_column(0, &(-ws.ct.wrenches(c, side).0));
                    if let Some(blk) = ws.solver.block_mut(node, b) {
                        *blk = row;
                    }
                    if let Some(blk) = ws.solver.block_mut(b, node) {
                        *blk = col;
                    }
                }
                ws.residual[node] = Vector6::new(r[1] - gamma * r[0], 0.0, 0.0, 0.0, 0.0, 0.0);
                continue;
            }
            let (y, s, eta, sigma) = (ws.ct.y[c], ws.ct.s[c], ws.ct.eta[c], ws.ct.sigma[c]);
            let r = ws.ct.res[c];
            // node diagonal
            let mut d = Matrix6::zeros();
            d[(0, 0)] = s;
            for i in 0..4 {
                d[(1 + i, 1 + i)] = eta[i];
                d[(1 + i, 5)] = y[1 + i];
                d[(5, 1 + i)] = -y[5];
            }
            d[(5, 0)] = y[5] * info.friction;
            d[(5, 5)] = sigma;
            *ws.solver.diagonal_mut(node) = d;
            for (side, b) in sides.into_iter().enumerate() {
                let Some(b) = b else { continue };
                let (n_now, b_now) = ws.ct.wrenches(c, side);
                // node ← body: γ δφ and β_i B_i δż
                let mut row = Matrix6::zeros();
                row.set_row(0, &(grads[side].transpose() * y[0]));
                for i in 0..4 {
                    for k in 0..6 {
                        row[(1 + i, k)] = y[1 + i] * b_now[i][k];
                    }
                }
                // body ← node: −N, −B_i
                let mut col = Matrix6::zeros();
                col.set_column(0, &(-n_now));
                for i in 0..4 {
                    col.set_column(1 + i, &(-b_now[i]));
                }
                if let Some(blk) = ws.solver.block_mut(node, b) {
                    *blk = row;
                }
                if let Some(blk) = ws.solver.block_mut(b, node) {
                    *blk = col;
                }
            }
            // negated condensed right-hand side
            let mut rhs = Vector6::zeros();
            rhs[0] = r[1] - y[0] * r[0];
            for i in 0..4 {
                rhs[1 + i] = r[6 + i] + y[1 + i] * r[2 + i];
            }
            rhs[5] = r[11] - y[5] * r[10];
            ws.residual[node] = rhs;
        }
        for (l, lim) in mech.limits.iter().enumerate() {
            let node = self.limit_node(l);
            let jt = &mech.joints[lim.joint];
            let (y, s, r) = (ws.ct.lim_y[l], ws.ct.lim_s[l], ws.ct.lim_res[l]);
            let mut d = Matrix6::zeros();
            d[(0, 0)] = s[0];
            d[(1, 1)] = s[1];
            *ws.solver.diagonal_mut(node) = d;
            let (_, (wa1, wb1)) = mech.joint_wrench_jacobians(lim.joint, &ws.next, &[1.0]);
            for (body, w_now, w_next) in [(Some(jt.child), ws.ct.lim_w_now[l].1, wb1), (jt.parent, ws.ct.lim_w_now[l].0, wa1)] {
                let Some(b) = body else { continue };
                // δθ = W(z_{k+1})·[Δt δv; E δω]
                let e = update_tangent(&ws.w[b], dt);
                let rot = e.transpose() * w_next.fixed_rows::<3>(3);
                let mut grad = Vector6::zeros();
                grad.fixed_rows_mut::<3>(0).copy_from(&(w_next.fixed_rows::<3>(0) * dt));
                grad.fixed_rows_mut::<3>(3).copy_from(&rot);
                let mut row = Matrix6::zeros();
                for k in 0..6 {
                    row[(0, k)] = y[0] * grad[k];
                    row[(1, k)] = -y[1] * grad[k];
                }
                if let Some(blk) = ws.solver.block_mut(node, b) {
                    *blk = row;
                }
                let mut col = Matrix6::zeros();
                col.set_column(0, &(-w_now));
                col.set_column(1, &w_now);
                if let Some(blk) = ws.solver.block_mut(b, node) {
                    *blk = col;
                }
            }
            ws.residual[node] = Vector6::new(r[2] - y[0] * r[0], r[3] - y[1] * r[1], 0.0, 0.0, 0.0, 0.0);
        }
    }

    /// The inequality parts of `∂R/∂x` for the linearisation (added into `rx`, rows in node
    /// order with `offsets`, columns the 12 tangent coordinates per body), at the converged
    /// interior-point solution (the `μ`-relaxed system at the final `μ`). Contact nodes carry
    /// the condensed rows `[−γ ∂r_a/∂x; β_i ∂r_c,i/∂x; 0]`, `r_a = s − φ(z_k ⊕ Δt ż_k)`,
    /// `r_c,i = B_i(z_k) ż + ψ − η_i`; bodies the derivative of `−N γ − Σ B_i β_i`
    /// (`∂(p × R_kᵀa)/∂θ = [p×][R_kᵀa×]`). Limits: `[−γ_lo ∂r_a,lo/∂x; −γ_hi ∂r_a,hi/∂x]` and the
    /// derivative of the joint wrench of `γ_lo − γ_hi`.
    pub(crate) fn inequality_jacobian(&self, ws: &MaximalWorkspace, rx: &mut nalgebra::DMatrix<f64>, offsets: &[usize]) {
        use vidyn_spatial::skew;
        let mech = &**self.mechanism();
        let dt = self.dt();
        let step_rot = |w: &Vector3<f64>| crate::body::step_quaternion(w, dt).map_or(nalgebra::Matrix3::identity(), |q| q.to_rotation_matrix().into_inner());
        for (c, ct) in mech.contacts.iter().enumerate() {
            let (node, b) = (self.contact_node(c), ct.body);
            let y = ws.ct.y[c];
            let now = &ws.now_poses()[b];
            let rk = now.rotation();
            // body rows: −∂(N γ + Σ B_i β_i)/∂θ_k, with f the world force
            let dirs = ct.directions();
            let f = match ct.friction_model {
                FrictionModel::Pyramid => ct.normal * y[0] + dirs[0] * y[1] + dirs[1] * y[2] + dirs[2] * y[3] + dirs[3] * y[4],
                FrictionModel::Cone => ct.normal * y[0] + ct.tangents[0] * y[1] + ct.tangents[1] * y[2],
                FrictionModel::Frictionless => ct.normal * y[0],
            };
            let dw = skew(&ct.point) * skew(&(rk.transpose() * f));
            for r in 0..3 {
                for k in 0..3 {
                    rx[(offsets[b] + 3 + r, 12 * b + 3 + k)] -= dw[(r, k)];
                }
            }
            // node row 0: −γ ∂r_a/∂x = γ ∂φ(z₊)/∂x with δz₊ = (δx, R(w)ᵀ δθ)
            let next = &ws.next[b];
            let m = ct.point.cross(&(next.rotation().transpose() * ct.normal));
            let dphi_th = step_rot(&ws.w[b]) * m;
            for k in 0..3 {
                rx[(offsets[node], 12 * b + k)] += y[0] * ct.normal[k];
                rx[(offsets[node], 12 * b + 3 + k)] += y[0] * dphi_th[k];
            }
            // friction rows, through ∂(B_i ż)/∂θ_k = ωᵀ [p×][R_kᵀd_i×]: pyramid rows 1..4
            // β_i ∂(B_i ż)/∂θ_k, cone rows 1..3 Arw(x) (0, ∂(B ż)/∂θ_k)
            let w = ws.w[b];
            let rate = |d: &Vector3<f64>| (w.transpose() * skew(&ct.point) * skew(&(rk.transpose() * d))).transpose();
            let mut rows = [Vector3::zeros(); 4];
            let n_rows = match ct.friction_model {
                FrictionModel::Pyramid => {
                    for i in 0..4 {
                        rows[i] = rate(&dirs[i]) * y[1 + i];
                    }
                    4
                }
                FrictionModel::Cone => {
                    let x = crate::friction_cone::primal(ct.friction, &y);
                    let (g1, g2) = (rate(&ct.tangents[0]), rate(&ct.tangents[1]));
                    rows[0] = g1 * x.y + g2 * x.z;
                    rows[1] = g1 * x.x;
                    rows[2] = g2 * x.x;
                    3
                }
                FrictionModel::Frictionless => 0,
            };
            for (i, g) in rows.iter().take(n_rows).enumerate() {
                for k in 0..3 {
                    rx[(offsets[node] + 1 + i, 12 * b + 3 + k)] += g[k];
                }
            }
        }
        for (l, lim) in mech.limits.iter().enumerate() {
            let node = self.limit_node(l);
            let jt = &mech.joints[lim.joint];
            let bodies = [jt.parent, Some(jt.child)];
            let y = ws.ct.lim_y[l];
            let (jac, _) = mech.joint_wrench_jacobians(lim.joint, ws.now_poses(), &[y[0] - y[1]]);
            for (rs, rb) in bodies.iter().enumerate() {
                let Some(rb) = rb else { continue };
                for (cs, cb) in bodies.iter().enumerate() {
                    let Some(cb) = cb else { continue };
                    for r in 0..6 {
                        for k in 0..6 {
                            rx[(offsets[*rb] + r, 12 * cb + k)] -= jac[rs][cs][(r, k)];
                        }
                    }
                }
            }
            let (_, (wa, wb)) = mech.joint_wrench_jacobians(lim.joint, &ws.next, &[1.0]);
            for (side, g) in [(0, wa), (1, wb)] {
                let Some(b) = bodies[side] else { continue };
                let th = step_rot(&ws.w[b]) * g.fixed_rows::<3>(3);
                for k in 0..3 {
                    // −γ_lo ∂r_a,lo/∂x = γ_lo ∂θ/∂x, −γ_hi ∂r_a,hi/∂x = −γ_hi ∂θ/∂x
                    rx[(offsets[node], 12 * b + k)] += y[0] * g[k];
                    rx[(offsets[node], 12 * b + 3 + k)] += y[0] * th[k];
                    rx[(offsets[node] + 1, 12 * b + k)] -= y[1] * g[k];
                    rx[(offsets[node] + 1, 12 * b + 3 + k)] -= y[1] * th[k];
                }
            }
        }
    }

    /// `∂φ(z_{k+1})/∂ż_k` of contact `c`'s gap on its first and (body contacts) second body:
    /// `[Δt ∂φ/∂x; Eᵀ ∂φ/∂θ]` at `z_{k+1} = z_k ⊕ Δt ż_k` (`E` of [`update_tangent`]); for a
    /// plane `∂φ/∂x = n`, `∂φ/∂θ = p × R₊ᵀn`, for two bodies [`crate::geometry::distance_gradient`].
    fn gap_gradients(&self, ws: &MaximalWorkspace, c: usize) -> [Vector6<f64>; 2] {
        let mech = &**self.mechanism();
        let dt = self.dt();
        let tangent = |b: usize, dx: &Vector3<f64>, dth: &Vector3<f64>| {
            let dphi_w = update_tangent(&ws.w[b], dt).transpose() * dth;
            let dphi_v = dx * dt;
            Vector6::new(dphi_v.x, dphi_v.y, dphi_v.z, dphi_w.x, dphi_w.y, dphi_w.z)
        };
        if let Some(ct) = mech.contacts.get(c) {
            let b = ct.body;
            let m = ct.point.cross(&(ws.next[b].rotation().transpose() * ct.normal));
            return [tangent(b, &ct.normal, &m), Vector6::zeros()];
        }
        let bc = &mech.body_contacts[c - mech.contacts.len()];
        let [a, b] = bc.bodies;
        let (pa, pb) = (&ws.next[a], &ws.next[b]);
        let g = crate::geometry::distance_gradient(&bc.frame(&ws.next).prox, (&pa.x, &pa.rotation()), (&pb.x, &pb.rotation()));
        let part = |k: usize| Vector3::new(g[k], g[k + 1], g[k + 2]);
        [tangent(a, &part(0), &part(3)), tangent(b, &part(6), &part(9))]
    }

    /// Recovers `(δs, δη, δσ)` (cone: `(δs, δz̄)`) from the solved direction.
    fn recover_contact_direction(&self, ws: &mut MaximalWorkspace) {
        let mech = &**self.mechanism();
        let dt = self.dt();
        for c in 0..self.ncontacts() {
            let node = self.contact_node(c);
            let info = self.contact_info(c);
            let dy = ws.direction[node];
            let r = ws.ct.res[c];
            let grads = self.gap_gradients(ws, c);
            // B_i δż and ∂φ/∂ż δż over the contact's bodies
            let dz = ws.direction[info.body];
            let (mut dphi, mut bdz) = (grads[0].dot(&dz), ws.ct.b_now[c].map(|b| b.dot(&dz)));
            if let Some(o) = info.other {
                let dzo = ws.direction[o];
                dphi += grads[1].dot(&dzo);
                for i in 0..4 {
                    bdz[i] += ws.ct.b_now_b[c][i].dot(&dzo);
                }
            }
            ws.ct.ds[c] = dphi - r[0];
            if info.model == FrictionModel::Frictionless {
                continue;
            }
            if info.model == FrictionModel::Cone {
                ws.ct.dzt[c] = Vector2::new(bdz[0] - r[2], bdz[2] - r[3]);
                continue;
            }
            let mut sum = 0.0;
            for i in 0..4 {
                ws.ct.deta[c][i] = bdz[i] + dy[5] + r[2 + i];
                sum += dy[1 + i];
            }
            ws.ct.dsigma[c] = info.friction * dy[0] - sum - r[10];
        }
        for (l, lim) in mech.limits.iter().enumerate() {
            let jt = &mech.joints[lim.joint];
            let (_, (wa1, wb1)) = mech.joint_wrench_jacobians(lim.joint, &ws.next, &[1.0]);
            let mut dth = 0.0;
            for (body, w_next) in [(Some(jt.child), wb1), (jt.parent, wa1)] {
                let Some(b) = body else { continue };
                let dz = ws.direction[b];
                let e = update_tangent(&ws.w[b], dt);
                dth += dt * w_next.fixed_rows::<3>(0).dot(&dz.fixed_rows::<3>(0)) + (e.transpose() * w_next.fixed_rows::<3>(3)).dot(&dz.fixed_rows::<3>(3));
            }
            let r = ws.ct.lim_res[l];
            ws.ct.lim_ds[l] = nalgebra::Vector2::new(dth - r[0], -dth - r[1]);
        }
    }

    /// Largest step in (0, 1] keeping every positive variable above `(1 − τ)` of its value.
    fn fraction_to_boundary(&self, ws: &MaximalWorkspace, tau: f64) -> f64 {
        let mut alpha = 1.0_f64;
        let mut limit = |x: f64, dx: f64| {
            if dx < 0.0 {
                alpha = alpha.min(-tau * x / dx);
            }
        };
        let mut cone_alpha = f64::INFINITY;
        for c in 0..self.ncontacts() {
            let node = self.contact_node(c);
            let info = self.contact_info(c);
            let (y, dy) = (ws.ct.y[c], ws.direction[node]);
            limit(ws.ct.s[c], ws.ct.ds[c]);
            if info.model == FrictionModel::Frictionless {
                limit(y[0], dy[0]);
                continue;
            }
            if info.model == FrictionModel::Cone {
                limit(y[0], dy[0]);
                cone_alpha = cone_alpha.min(crate::friction_cone::largest_step(&ws.ct, c, info.friction, &dy));
                continue;
            }
            for k in 0..6 {
                limit(y[k], dy[k]);
            }
            limit(ws.ct.sigma[c], ws.ct.dsigma[c]);
            for i in 0..4 {
                limit(ws.ct.eta[c][i], ws.ct.deta[c][i]);
            }
        }
        for l in 0..self.mechanism().limits.len() {
            let dy = ws.direction[self.limit_node(l)];
            for k in 0..2 {
                limit(ws.ct.lim_y[l][k], dy[k]);
                limit(ws.ct.lim_s[l][k], ws.ct.lim_ds[l][k]);
            }
        }
        alpha.min(tau * cone_alpha)
    }

    fn save_contact_base(ws: &mut MaximalWorkspace) {
        let ct = &mut ws.ct;
        ct.y_base.copy_from_slice(&ct.y);
        ct.s_base.copy_from_slice(&ct.s);
        ct.eta_base.copy_from_slice(&ct.eta);
        ct.sigma_base.copy_from_slice(&ct.sigma);
        ct.zt_base.copy_from_slice(&ct.zt);
        ct.lim_y_base.copy_from_slice(&ct.lim_y);
        ct.lim_s_base.copy_from_slice(&ct.lim_s);
    }

    fn set_contact_trial(&self, ws: &mut MaximalWorkspace, alpha: f64) {
        for c in 0..self.ncontacts() {
            let node = self.contact_node(c);
            ws.ct.y[c] = ws.ct.y_base[c] + ws.direction[node] * alpha;
            ws.ct.s[c] = ws.ct.s_base[c] + ws.ct.ds[c] * alpha;
            ws.ct.eta[c] = ws.ct.eta_base[c] + ws.ct.deta[c] * alpha;
            ws.ct.sigma[c] = ws.ct.sigma_base[c] + ws.ct.dsigma[c] * alpha;
            ws.ct.zt[c] = ws.ct.zt_base[c] + ws.ct.dzt[c] * alpha;
        }
        for l in 0..self.mechanism().limits.len() {
            let dy = ws.direction[self.limit_node(l)];
            ws.ct.lim_y[l] = ws.ct.lim_y_base[l] + nalgebra::Vector2::new(dy[0], dy[1]) * alpha;
            ws.ct.lim_s[l] = ws.ct.lim_s_base[l] + ws.ct.lim_ds[l] * alpha;
        }
    }

    /// The interior-point step (see the module docs); the equality-only path is
    /// [`MaximalIntegrator::step`]'s plain Newton. With `barrier = Some(μ*)` (one of the
    /// schedule's values `10⁻ᵏ`) the barrier stops at `μ*` and the step converges on the
    /// `μ*`-residual: the solution of the system relaxed at `μ*` (for tests that difference it).
    pub(crate) fn step_interior_point(
        &self,
        ws: &mut MaximalWorkspace,
        step: usize,
        p_scale: f64,
        next: &mut [BodyState],
        barrier: Option<f64>,
    ) -> Result<StepStats> {
        const TAU: f64 = 0.95;
        let tol = 100.0 * self.tolerance();
        let max_iterations = self.max_iterations().max(100);
        self.prepare_contacts(ws);
        let merit_of = |s: &Self, ws: &mut MaximalWorkspace, mu: f64| -> Option<(f64, f64)> {
            let m = s.evaluate(ws, p_scale)?;
            let eq_max = s.scaled_max(ws, p_scale);
            let (cm, cmax) = s.contact_residuals(ws, mu, p_scale);
            Some((m + cm, eq_max.max(cmax)))
        };
        let (mut merit, _) = merit_of(self, ws, ws.ct.mu).ok_or_else(|| self.spin(ws, step))?;
        for it in 0..=max_iterations {
            // convergence on the unperturbed residual
            let (_, max0) = merit_of(self, ws, barrier.unwrap_or(0.0)).ok_or_else(|| self.spin(ws, step))?;
            if max0 <= tol {
                let violation = self.violation(ws);
                for i in 0..next.len() {
                    next[i] = BodyState { pose: ws.next[i], v: ws.v[i], w: ws.w[i] };
                }
                ws.last_stats = StepStats { iterations: it, residual: max0, constraint_violation: violation, barrier: ws.ct.mu };
                return Ok(ws.last_stats);
            }
            if it == max_iterations || !max0.is_finite() {
                return Err(MaximalError::NewtonDiverged { step, iterations: it, residual: max0, tolerance: tol });
            }
            let mu = ws.ct.mu;
            merit_of(self, ws, mu).ok_or_else(|| self.spin(ws, step))?;
            self.assemble(ws);
            self.assemble_contacts(ws);
            ws.solver.factorize().map_err(|node| self.singular_pivot(node, step))?;
            for (d, r) in ws.direction.iter_mut().zip(&ws.residual) {
                *d = -r;
            }
            ws.solver.solve(&mut ws.direction);
            self.recover_contact_direction(ws);
            let mut alpha = self.fraction_to_boundary(ws, TAU);
            self.save_base(ws);
            Self::save_contact_base(ws);
            let mut accepted = None;
            for _ in 0..=10 {
                self.set_trial_pub(ws, alpha);
                self.set_contact_trial(ws, alpha);
                if let Some((m, _)) = merit_of(self, ws, mu) {
                    if m < merit {
                        accepted = Some(m);
                        break;
                    }
                }
                alpha *= 0.5;
            }
            let m = match accepted {
                Some(m) => m,
                None => {
                    // no decrease: take the smallest step tried (still inside the boundary)
                    self.set_trial_pub(ws, alpha);
                    self.set_contact_trial(ws, alpha);
                    merit_of(self, ws, mu).ok_or_else(|| self.spin(ws, step))?.0
                }
            };
            // barrier update on the μ-residual, never below the μ whose complementarity residual
            // (weighted: w μ) is a tenth of the tolerance (as IPOPT's floor ε_tol/10): a smaller
            // μ buys no accuracy and costs the pivots of sticking contacts their conditioning
            let (_, max_mu) = merit_of(self, ws, mu).ok_or_else(|| self.spin(ws, step))?;
            let w = self.dt() / p_scale;
            let mu_min = barrier.map_or(0.1 * tol / w, |b| b * (1.0 - 1e-9));
            while max_mu < 10.0 * w * ws.ct.mu && 0.1 * ws.ct.mu >= mu_min {
                ws.ct.mu *= 0.1;
            }
            merit = if ws.ct.mu == mu { m } else { merit_of(self, ws, ws.ct.mu).ok_or_else(|| self.spin(ws, step))?.0 };
        }
        unreachable!("the loop returns at it == max_iterations")
    }
}
