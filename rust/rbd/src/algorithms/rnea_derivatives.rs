//! First-order partial derivatives of inverse dynamics, `∂τ/∂q`, `∂τ/∂q̇`, `∂τ/∂q̈ = M`.
//!
//! # Derivation (world frame; our own, equivalent to IDSVA of Singh, Russell & Wensing 2023,
//! eqs. 12–13, and to Carpentier & Mansard 2018)
//! All quantities are world-frame spatial vectors: `J_k = ⁰X_i S_k` is the column of dof `k`
//! (moving body `i`), `V_i`, `A_i` body velocity and acceleration (the world accelerates at
//! `−g`), `I_i` the body inertia, `h_i = I_i V_i`, `F_i = I_i A_i + V_i ×* h_i`, and
//! `τ_j = J_jᵀ F^C_j` with `F^C_j` the sum of `F_i` over the subtree of `j`. A perturbation
//! of `q_k` along `S_k` (the right-perturbation `q ⊕ δ e_k`) rotates the subtree of `k`
//! rigidly about the world twist `J_k`; what does not rotate is the motion of `k`'s parent
//! `λ`. Writing
//! * `ψ_k = V_λ × J_k`, `φ_k = V_i × J_k` (`= J̇_k`), `α_k = A_λ × J_k − ψ_k × V_λ`,
//! * `B_i = (V_i ×*) I_i − I_i (V_i ×) + (h_i ×̄*)` (Singh et al.'s `ℬ(I, V)` with the cross-bar
//!   operator), with subtree sums `I^C`, `B^C`, `F^C`,
//!
//! one finds `∂F_i/∂q_k = J_k ×* F_i + I_i α_k + B_i ψ_k` and
//! `∂F_i/∂q̇_k = I_i (φ_k + ψ_k) + B_i J_k` for every body `i` in the subtree of `k`. The term
//! `J_k ×* F^C_j` cancels against `∂J_j/∂q_k = J_k × J_j` whenever `k ⪯ j`, leaving
//! * `k ⪯ j`: `∂τ_j/∂q_k = J_jᵀ (I^C_j α_k + B^C_j ψ_k)`,
//!   `∂τ_j/∂q̇_k = J_jᵀ (I^C_j (φ_k + ψ_k) + B^C_j J_k)`, `M_jk = J_jᵀ I^C_j J_k`;
//! * `j ≺ k`: `∂τ_j/∂q_k = J_jᵀ (J_k ×* F^C_k + I^C_k α_k + B^C_k ψ_k)`,
//!   `∂τ_j/∂q̇_k = J_jᵀ (I^C_k (φ_k + ψ_k) + B^C_k J_k)`;
//! * zero when `j` and `k` are not on one path to the root.
//!
//! Cost O(n + nv·d) (d = depth), plus O(nv²) to clear the outputs.
//!
//! # External forces (`fext` of [`rnea_derivatives`])
//! A wrench `f^ext_i` given in body frame `i` (Pinocchio's `fext` convention, see
//! [`crate::rnea`]) is attached to the body: its world-frame value
//! `F^ext_i = ⁰X*_i f^ext_i` turns with the body. Under the perturbation of `q_k` the subtree
//! of `k` turns rigidly about `J_k`, so
//! * `∂F^ext_i/∂q_k = J_k ×* F^ext_i` for `k ⪯ i` (zero otherwise), and `F^ext` depends on
//!   neither `q̇` nor `q̈`.
//!
//! That is exactly the `J_k ×* F_i` term of `∂F_i/∂q_k` above, so every formula holds with
//! `F_i ← F_i − F^ext_i` (hence `F^C ← F^C − F^{ext,C}`, the subtree sum). Explicitly, the
//! wrenches add
//! * `−J_jᵀ (J_k ×* F^{ext,C}_k)` to `∂τ_j/∂q_k` for `j ≺ k` (a wrench on the subtree of `k`,
//!   turned by `q_k`, changes the torque of every ancestor joint `j`);
//! * nothing for `k ⪯ j`: `−J_jᵀ F^{ext,C}_j` is invariant when the subtree of `j` turns
//!   rigidly (`∂J_j/∂q_k = J_k × J_j` cancels `J_k ×* F^{ext,C}_j`), and nothing to
//!   `∂τ/∂q̇`, `M`.
//!
//! A wrench fixed in the *world* frame instead would not turn, and would add
//! `+J_jᵀ(J_k ×* F^{ext,C}_{max(j,k)})` to every pair on a common path; vidyn (like Pinocchio)
//! takes body-frame wrenches, so that case is the caller's change of frame.

use crate::algorithms::kinematics::placements_unchecked;
use crate::check::{check_configuration, check_forces, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Matrix6};
use vidyn_spatial::{Force, Motion};

/// The three first-order partials of inverse dynamics, borrowed from the workspace.
#[derive(Debug)]
pub struct RneaDerivatives<'w> {
    /// `∂τ/∂q` (nv, nv): row = torque, column = tangent direction of q.
    pub dtau_dq: &'w DMatrix<f64>,
    /// `∂τ/∂q̇` (nv, nv).
    pub dtau_dv: &'w DMatrix<f64>,
    /// `∂τ/∂q̈ = M(q)` (nv, nv), full and symmetric.
    pub dtau_da: &'w DMatrix<f64>,
}

/// Partial derivatives of `τ = rnea(q, v, a)` with respect to `q` (on the configuration
/// manifold: columns are derivatives along `q ⊕ δ e_k`), `v` and `a`, as derived in the
/// module documentation. `q`: (nq,), `v`, `a`: (nv,). Also leaves `τ` in `ws.tau`.
/// Checked against central differences of [`crate::rnea`] in `tests::rnea_derivatives_match_finite_differences`
/// and `∂τ/∂a` against [`crate::crba`].
/// With `fext` (the wrenches of [`crate::rnea`]), their turning with the bodies adds to
/// `∂τ/∂q` (module documentation, "External forces"); checked against central differences
/// in `tests::external_force_derivatives_match_finite_differences`.
pub fn rnea_derivatives<'w>(model: &Model, ws: &'w mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) -> Result<RneaDerivatives<'w>> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, a, "a")?;
    if let Some(f) = fext {
        check_forces(model, f, "fext")?;
    }
    rnea_derivatives_unchecked(model, ws, q, v, a, fext);
    let d = &ws.derivatives;
    Ok(RneaDerivatives { dtau_dq: &d.dtau_dq, dtau_dv: &d.dtau_dv, dtau_da: &d.dtau_da })
}

/// World-frame forward pass and subtree sums shared by the first- and second-order
/// derivatives: fills `ws.placements` and `ws.derivatives.{columns, psi, phi, alpha,
/// velocities, accelerations, composite_forces, composite_b, composite_inertias}` (module
/// documentation; the world accelerates at `−g`). O(n).
pub(crate) fn world_forward_pass(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) {
    placements_unchecked(model, ws, q);
    let n = model.nbodies();
    let d = &mut ws.derivatives;
    for i in 0..n {
        let j = &model.joints[i];
        let iv = model.idx_v[i];
        let o = &ws.placements[i];
        let (vp, ap) = match model.parents[i] {
            Some(p) => (d.velocities[p], d.accelerations[p]),
            None => (Motion::zero(), -model.gravity),
        };
        let mut vi = vp;
        for c in 0..j.nv() {
            let col = j.placed_subspace_column(c, o);
            d.columns[iv + c] = col;
            vi += col * v[iv + c];
        }
        let mut ai = ap;
        for c in 0..j.nv() {
            let col = d.columns[iv + c];
            let phi = vi.cross_motion(&col);
            let psi = vp.cross_motion(&col);
            d.phi[iv + c] = phi;
            d.psi[iv + c] = psi;
            d.alpha[iv + c] = ap.cross_motion(&col) - psi.cross_motion(&vp);
            ai += col * a[iv + c] + phi * v[iv + c];
        }
        d.velocities[i] = vi;
        d.accelerations[i] = ai;
        let inertia = model.inertias[i].transformed(o);
        let h = inertia.mul_motion(&vi);
        d.composite_inertias[i] = inertia.to_matrix();
        d.composite_forces[i] = inertia.mul_motion(&ai) + vi.cross_force(&h);
        if let Some(f) = fext {
            d.composite_forces[i] -= o.act_force(&f[i]);
        }
        d.composite_b[i] = inertia_velocity_coupling(&d.composite_inertias[i], &vi, &h);
    }
    for i in (0..n).rev() {
        if let Some(p) = model.parents[i] {
            let f = d.composite_forces[i];
            d.composite_forces[p] += f;
            add_to_parent(&mut d.composite_b, i, p);
            add_to_parent(&mut d.composite_inertias, i, p);
        }
    }
}

/// `xs[parent] += xs[child]` in place (parents precede their children), without the copy of
/// `xs[child]` that indexing both would take: for 6×6 blocks that copy was a `memcpy` call.
#[inline(always)]
pub(crate) fn add_to_parent<T>(xs: &mut [T], child: usize, parent: usize)
where
    for<'a> T: std::ops::AddAssign<&'a T>,
{
    let (lower, upper) = xs.split_at_mut(child);
    lower[parent] += &upper[0];
}

/// The recursion of [`rnea_derivatives`] without argument checks (at zero velocity without
/// gravity, [`crate::algorithms::mass_derivative`] forms `∂τ/∂q` more cheaply). Results in
/// `ws.derivatives.{dtau_dq, dtau_dv, dtau_da}` and `ws.tau`.
pub(crate) fn rnea_derivatives_unchecked(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) {
    world_forward_pass(model, ws, q, v, a, fext);
    let d = &mut ws.derivatives;
    for i in 0..model.nbodies() {
        let iv = model.idx_v[i];
        for c in iv..iv + model.joints[i].nv() {
            ws.tau[c] = d.columns[c].dot(&d.composite_forces[i]);
        }
    }
    torque_derivatives(model, d, true);
}

/// `∂τ/∂q`, `∂τ/∂q̇` (and `M` when `with_mass`) into `d.{dtau_dq, dtau_dv, dtau_da}` from the
/// per-dof `J, ψ, φ, α` and the subtree sums `I^C, ℬ^C, F^C` (module documentation). With, for
/// a dof `c` of body `i`, `u_c = I^C_i J_c`, `w_c = ℬ^{C T}_i J_c`,
/// `t_c = J_c ×* F^C_i + I^C_i α_c + ℬ^C_i ψ_c` and `s_c = I^C_i (φ_c + ψ_c) + ℬ^C_i J_c`
/// (formed once per dof), a dof `r` of `i` or of an ancestor gives
/// `∂τ_c/∂q_r = u_c·α_r + w_c·ψ_r`, `∂τ_c/∂q̇_r = u_c·(φ_r + ψ_r) + w_c·J_r`,
/// `M_cr = M_rc = u_c·J_r`, and when `r` is on a strict ancestor `∂τ_r/∂q_c = J_r·t_c`,
/// `∂τ_r/∂q̇_c = J_r·s_c`. The first three are written row `r` at a time against the
/// contiguous columns of `r`'s subtree (contiguous in the column-major outputs too), the
/// others column `c` at a time up the path to the root. The other entries are zero.
///
/// Always inlined, as is [`inertia_velocity_coupling`]: each caller passes a constant
/// `with_mass`, and left to its heuristics LLVM inlined them into a Rust binary's ∂RNEA but
/// not into the Python extension's, whose batched ∂RNEA ran 3–4 % more instructions.
#[inline(always)]
pub(crate) fn torque_derivatives(model: &Model, d: &mut DerivativeWorkspace, with_mass: bool) {
    let nv = model.nv;
    for i in 0..model.nbodies() {
        let (iv, nvi) = (model.idx_v[i], model.joints[i].nv());
        let (ic, bc, fc) = (&d.composite_inertias[i], &d.composite_b[i], d.composite_forces[i]);
        for c in iv..iv + nvi {
            let jc = d.columns[c];
            let jcv = jc.to_vector();
            d.momenta[c] = Force::from_vector(&(ic * jcv));
            d.pair_forces[c] = [
                Force::from_vector(&bc.tr_mul(&jcv)),
                jc.cross_force(&fc) + Force::from_vector(&(ic * d.alpha[c].to_vector() + bc * d.psi[c].to_vector())),
                Force::from_vector(&(ic * (d.phi[c] + d.psi[c]).to_vector() + bc * jcv)),
            ];
        }
    }
    // column-major: entry (row, col) at col·nv + row
    let (dq, dv, da) = (d.dtau_dq.as_mut_slice(), d.dtau_dv.as_mut_slice(), d.dtau_da.as_mut_slice());
    dq.fill(0.0);
    dv.fill(0.0);
    if with_mass {
        da.fill(0.0);
    }
    for k in 0..model.nbodies() {
        let (iv, end) = (model.idx_v[k], model.idx_v[k] + model.nv_subtree[k]);
        for r in iv..iv + model.joints[k].nv() {
            let (jr, ar, pr, fr) = (d.columns[r], d.alpha[r], d.psi[r], d.phi[r] + d.psi[r]);
            let cols = iv..end;
            let (dq_r, dv_r) = (&mut dq[r * nv + iv..r * nv + end], &mut dv[r * nv + iv..r * nv + end]);
            for (((x, y), u), [w, _, _]) in dq_r.iter_mut().zip(dv_r.iter_mut()).zip(&d.momenta[cols.clone()]).zip(&d.pair_forces[cols.clone()]) {
                *x = ar.dot(u) + pr.dot(w);
                *y = fr.dot(u) + jr.dot(w);
            }
            if with_mass {
                for (m, u) in da[r * nv + iv..r * nv + end].iter_mut().zip(&d.momenta[cols]) {
                    *m = jr.dot(u);
                }
            }
        }
    }
    for i in 0..model.nbodies() {
        for c in model.idx_v[i]..model.idx_v[i] + model.joints[i].nv() {
            let [_, t, s] = d.pair_forces[c];
            let mut up = model.parents[i];
            while let Some(k) = up {
                for r in model.idx_v[k]..model.idx_v[k] + model.joints[k].nv() {
                    let jr = d.columns[r];
                    dq[c * nv + r] = jr.dot(&t);
                    dv[c * nv + r] = jr.dot(&s);
                    if with_mass {
                        da[c * nv + r] = da[r * nv + c];
                    }
                }
                up = model.parents[k];
            }
        }
    }
}

/// `ℬ(I, V) = (V×*) I − I (V×) + (h ×̄*)` with `h = I V` (Singh, Russell & Wensing 2023):
/// with `P = (V×*) I`, a symmetric `I` gives `−I (V×) = Pᵀ`, so one 6×6 product (six force
/// cross products, one per column of `I`) instead of two.
#[inline(always)]
pub(crate) fn inertia_velocity_coupling(im: &Matrix6<f64>, v: &Motion, h: &Force) -> Matrix6<f64> {
    let p = v.cross_force_mul(im);
    p + p.transpose() + h.cross_bar_matrix()
}

/// World-frame scratch and results of [`rnea_derivatives`]. Sizes: `n` bodies, `nv` dofs.
#[derive(Clone, Debug)]
pub struct DerivativeWorkspace {
    /// `(nv,)` world-frame joint columns `J_k = ⁰X_i S_k`.
    pub columns: Vec<Motion>,
    /// `(nv,)` `ψ_k = V_λ × J_k`.
    pub psi: Vec<Motion>,
    /// `(nv,)` `φ_k = V_i × J_k = J̇_k`.
    pub phi: Vec<Motion>,
    /// `(nv,)` `α_k = A_λ × J_k − ψ_k × V_λ`.
    pub alpha: Vec<Motion>,
    /// `(nv,)` `I^C_i J_k`, the momentum of the subtree of the body `i` of dof `k` moving
    /// with `J_k` (world frame). CRBA and the derivatives' pair loops.
    pub momenta: Vec<Force>,
    /// `(nv,)` per-dof forces of the pair loop of the torque derivatives: `[ℬ^{C T}_i J_k,
    /// J_k ×* F^C_i + I^C_i α_k + ℬ^C_i ψ_k, I^C_i (φ_k + ψ_k) + ℬ^C_i J_k]` (`i` the body of
    /// dof `k`).
    pub pair_forces: Vec<[Force; 3]>,
    /// `(n,)` world-frame body velocities `V_i`.
    pub velocities: Vec<Motion>,
    /// `(n,)` world-frame body accelerations `A_i` (world at `−g`).
    pub accelerations: Vec<Motion>,
    /// `(n,)` subtree sums `F^C_i` of `F_i = I_i A_i + V_i ×* I_i V_i`, world frame.
    pub composite_forces: Vec<Force>,
    /// `(n,)` subtree sums `B^C_i` of `ℬ(I_i, V_i)`, world frame.
    pub composite_b: Vec<nalgebra::Matrix6<f64>>,
    /// `(n,)` subtree sums `I^C_i` of the world-frame inertias.
    pub composite_inertias: Vec<nalgebra::Matrix6<f64>>,
    /// `(nv, nv)` `∂τ/∂q`.
    pub dtau_dq: DMatrix<f64>,
    /// `(nv, nv)` `∂τ/∂q̇`.
    pub dtau_dv: DMatrix<f64>,
    /// `(nv, nv)` `∂τ/∂q̈ = M`.
    pub dtau_da: DMatrix<f64>,
    /// `(nv, nv)` `∂q̈/∂q`. ABA derivatives.
    pub dddq_dq: DMatrix<f64>,
    /// `(nv, nv)` `∂q̈/∂q̇`. ABA derivatives.
    pub dddq_dv: DMatrix<f64>,
}

impl DerivativeWorkspace {
    pub(crate) fn new(model: &Model) -> Self {
        let (n, nv) = (model.nbodies(), model.nv);
        Self {
            columns: vec![Motion::zero(); nv],
            psi: vec![Motion::zero(); nv],
            phi: vec![Motion::zero(); nv],
            alpha: vec![Motion::zero(); nv],
            momenta: vec![Force::zero(); nv],
            pair_forces: vec![[Force::zero(); 3]; nv],
            velocities: vec![Motion::zero(); n],
            accelerations: vec![Motion::zero(); n],
            composite_forces: vec![Force::zero(); n],
            composite_b: vec![nalgebra::Matrix6::zeros(); n],
            composite_inertias: vec![nalgebra::Matrix6::zeros(); n],
            dtau_dq: DMatrix::zeros(nv, nv),
            dtau_dv: DMatrix::zeros(nv, nv),
            dtau_da: DMatrix::zeros(nv, nv),
            dddq_dq: DMatrix::zeros(nv, nv),
            dddq_dv: DMatrix::zeros(nv, nv),
        }
    }
}
