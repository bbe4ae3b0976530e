//! The configuration derivative of a mass-matrix product, `T = ∂(M(q) a)/∂q` at fixed `a`.
//!
//! `M(q) a` is inverse dynamics without gravity at zero velocity, so `T` is the `∂τ/∂q` of
//! [`crate::rnea_derivatives`] with `v = 0`, `g = 0` (Singh, Russell & Wensing 2023 call the
//! product `Σ_l ∂M_{·l}/∂q a_l` IDFOZA, their eq. 52). At zero velocity the terms in `ψ`, `φ`
//! and `ℬ` of that module's derivation vanish and `α_k = A_λ × J_k`, leaving, for the dof `j`
//! of body `i` and the dof `k` of body `b`,
//! * `b ⪯ i` (`k` on the path from the root to `j`): `T_jk = (I^C_i J_j)ᵀ α_k`;
//! * `i ≺ b` (`j` strictly above `k`): `T_jk = J_jᵀ (J_k ×* F^C_b + I^C_b α_k)`;
//! * zero off the paths to the root,
//!
//! with `A_i = A_λ + Σ_{k ∈ i} J_k a_k` (`A = 0` at the root) and the subtree force
//! `F^C_i = Σ_{l ⪰ i} I_l A_l`. Summing by dof instead of by body,
//! `F^C_i = I^C_i A_λ + Σ_{k ⪰ i} I^C_{b(k)} J_k a_k`, so only the subtree inertias `I^C` that
//! the CRBA already forms are needed. O(n·d) after the CRBA, no 6×6 matrices.
//!
//! [`mass_matrix_and_derivative`] returns `M` and `T` for an `a` that depends on `M` (the
//! velocity `v = M⁻¹ p` of a momentum, for instance), sharing one pass over the tree.

use crate::algorithms::crba::{crba, world_composites};
use crate::error::RbdError;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::DMatrix;
use vidyn_spatial::{Force, Motion};

/// `M(q)` and `T = ∂(M(q) a)/∂q` (module documentation), where `a` is chosen from `M`:
/// after [`crba`], `choose(M, a)` fills `a` (`(nv,)`, passed in with the caller's values and
/// used as it leaves `choose`), then `T` is formed at that `a`. `q`: (nq,). Returns `T`
/// (nv, nv; row = torque, column = tangent direction of `q`, as in
/// [`crate::rnea_derivatives`]); `M` stays in `ws.mass_matrix`. Errors from the argument
/// checks and from `choose` pass through. Checked against [`crate::rnea_derivatives`] without
/// gravity at zero velocity and against central differences of [`crba`] in
/// `tests::mass_derivative_*`.
pub fn mass_matrix_and_derivative<'w, E: From<RbdError>>(
    model: &Model,
    ws: &'w mut Workspace,
    q: &[f64],
    a: &mut [f64],
    choose: impl FnOnce(&DMatrix<f64>, &mut [f64]) -> Result<(), E>,
) -> Result<&'w DMatrix<f64>, E> {
    crate::check::check_tangent(model, a, "a")?;
    choose(crba(model, ws, q)?, a)?;
    crate::check::check_tangent(model, a, "a")?;
    mass_derivative_product_unchecked(model, ws, a);
    Ok(&ws.derivatives.dtau_dq)
}

/// `T = ∂(M(q) a)/∂q` into `ws.derivatives.dtau_dq`, with `q` given to [`world_composites`]
/// (which this calls). Inputs unchecked.
pub(crate) fn mass_derivative_product_world(model: &Model, ws: &mut Workspace, q: &[f64], a: &[f64]) {
    world_composites(model, ws, q);
    mass_derivative_product_unchecked(model, ws, a);
}

/// `T` from the placements, world columns and subtree inertias left by [`world_composites`]
/// (through [`crba`]) at the same `q`. Uses `ws.derivatives.{accelerations, alpha,
/// composite_forces}` as scratch.
pub(crate) fn mass_derivative_product_unchecked(model: &Model, ws: &mut Workspace, a: &[f64]) {
    let n = model.nbodies();
    let composite = &ws.origin_composites;
    let d = &mut ws.derivatives;
    // forward: A_i, α_k = A_λ × J_k and Σ_{k ∈ i} I^C_i J_k a_k
    for i in 0..n {
        let parent = model.parents[i].map_or(Motion::zero(), |p| d.accelerations[p]);
        let (iv, nvi) = (model.idx_v[i], model.joints[i].nv());
        let (mut acc, mut force) = (parent, Force::zero());
        for k in iv..iv + nvi {
            let col = d.columns[k];
            d.alpha[k] = parent.cross_motion(&col);
            acc += col * a[k];
            force += composite[i].mul_motion(&col) * a[k];
        }
        d.accelerations[i] = acc;
        d.composite_forces[i] = force;
    }
    // backward: subtree sums, then F^C_i = I^C_i A_λ + Σ_{k ⪰ i} I^C_{b(k)} J_k a_k
    for i in (0..n).rev() {
        if let Some(p) = model.parents[i] {
            let f = d.composite_forces[i];
            d.composite_forces[p] += f;
        }
    }
    for i in 0..n {
        if let Some(p) = model.parents[i] {
            d.composite_forces[i] += composite[i].mul_motion(&d.accelerations[p]);
        }
    }
    d.dtau_dq.as_mut_slice().fill(0.0);
    for i in 0..n {
        let (iv, nvi) = (model.idx_v[i], model.joints[i].nv());
        let fc = d.composite_forces[i];
        for j in iv..iv + nvi {
            let col = d.columns[j];
            let momentum = composite[i].mul_motion(&col);
            let below = col.cross_force(&fc) + composite[i].mul_motion(&d.alpha[j]);
            let mut body = Some(i);
            while let Some(b) = body {
                for k in model.idx_v[b]..model.idx_v[b] + model.joints[b].nv() {
                    d.dtau_dq[(j, k)] = d.alpha[k].dot(&momentum);
                    if b != i {
                        d.dtau_dq[(k, j)] = d.columns[k].dot(&below);
                    }
                }
                body = model.parents[b];
            }
        }
    }
}
