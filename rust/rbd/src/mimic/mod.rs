//! Mimic joints (URDF `<mimic>`, Pinocchio 3's `JointModelMimic`): a revolute or prismatic
//! joint whose coordinate follows another's, `q_j = m · q_l + o`, and has no coordinate of
//! its own.
//!
//! # The maths
//! A model with mimic joints is stored as its *extended* tree — every joint independent,
//! `nq_e` configuration and `n_e` velocity coordinates, which is what every algorithm of this
//! crate computes on — plus the affine coupling [`Coupling`] onto the `n` free coordinates:
//!
//! $$q_e = G q + o,\qquad v_e = G v,\qquad \dot v_e = G \dot v,$$
//!
//! with `G` (`n_e × n`) holding exactly one non-zero per row: `1` in a free coordinate's own
//! column, the multiplier `m` in its leader's column for a mimicking coordinate (`o` holds the
//! offsets, zero for free coordinates). The reduced system's Lagrangian is the extended one's
//! at the lifted state, so by the chain rule, exactly:
//!
//! * inverse dynamics `τ = Gᵀ τ_e(Gq + o, Gv, G\dot v)`, likewise nonlinear effects and
//!   gravity; the mass matrix `M = Gᵀ M_e G`;
//! * Jacobians (frames, centre of mass, the centroidal `A_G` and their time variations)
//!   `J = J_e G`; placements, velocities, energies at the lifted state;
//! * forward dynamics `\dot v = M⁻¹(τ − Gᵀ b_e)` (no O(n) articulated-body recursion exists
//!   for the coupled tree: a Cholesky factorisation of `M`);
//! * first derivatives `∂τ/∂q = Gᵀ (∂τ_e/∂q_e) G` (likewise in `v`, `\dot v`), then
//!   `∂\dot v/∂(q, v) = −M⁻¹ ∂τ/∂(q, v)` and `∂\dot v/∂τ = M⁻¹`; second-order tensors contract
//!   every index with `G` (`Gᵀ` on the output index).
//!
//! Because `G` has one non-zero per row, every product with it is a gather or a scatter:
//! O(n_e) per vector, O(n_e²) per matrix, O(n_e³) per tensor, never a dense `G`.
//!
//! A generalised force `f` of the reduced system is lifted by any `f_e` with `Gᵀ f_e = f`;
//! [`Coupling::lift_force`] takes the least-norm one, `f_e = G (GᵀG)⁻¹ f` (`GᵀG` is diagonal,
//! `1 + Σ m²` over the column's followers).
//!
//! # What is accepted
//! A mimicking joint and its leader are distinct revolute or prismatic joints (one
//! coordinate each), a joint mimics at most one leader, and a leader does not itself mimic
//! (no chains); multipliers and offsets are finite. The leader may come before or after its
//! follower in the tree order.

mod dynamics;
#[cfg(test)]
mod tests;

pub use dynamics::{
    aba, aba_derivatives, aba_second_order, crba, minverse, rnea, rnea_derivatives, rnea_second_order, rnea_second_order_contracted, MimicDerivatives,
    MimicSecondOrder, MimicWorkspace,
};

use crate::error::{RbdError, Result};
use crate::model::Model;
use nalgebra::{DMatrix, Dyn, Matrix, StorageMut};
use vidyn_spatial::Tensor3;

/// One mimicking joint: body `joint`'s coordinate is `multiplier · q_leader + offset`, with
/// `leader` the body whose joint it follows (body indices of the extended model).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mimic {
    pub joint: usize,
    pub leader: usize,
    pub multiplier: f64,
    pub offset: f64,
}

/// One row of `G` and `o`: extended coordinate `= factor · reduced[column] + offset`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    column: usize,
    factor: f64,
    offset: f64,
}

/// The affine map `q_e = G q + o`, `v_e = G v` of a model's mimic joints ([module
/// documentation](self)), built by [`Coupling::new`]. For a model without mimic joints it is
/// the identity.
#[derive(Clone, Debug, PartialEq)]
pub struct Coupling {
    /// `(nq_e,)` configuration rows.
    q_rows: Vec<Row>,
    /// `(n_e,)` velocity rows (offsets zero).
    v_rows: Vec<Row>,
    /// `(nq,)` extended index of each reduced configuration coordinate.
    free_q: Vec<usize>,
    /// `(n,)` extended index of each reduced velocity coordinate.
    free_v: Vec<usize>,
    /// `(n,)` `(GᵀG)_cc = Σ_r G_rc²`.
    gram: Vec<f64>,
}

impl Model {
    /// Whether the model has mimic joints ([`crate::mimic`]).
    #[must_use]
    pub fn has_mimics(&self) -> bool {
        !self.mimics.is_empty()
    }

    /// This model with `mimics` (body indices of this model; replacing any it had), checked
    /// as the [module documentation](self) says.
    ///
    /// # Errors
    /// [`RbdError::InvalidModel`] naming the joint for a mimic that is not accepted.
    pub fn with_mimics(mut self, mimics: Vec<Mimic>) -> Result<Self> {
        let n = self.nbodies();
        let name = |b: usize| self.joint_names.get(b).map_or("?", String::as_str);
        for (k, m) in mimics.iter().enumerate() {
            let what = format!("mimic joint '{}' (of '{}')", name(m.joint), name(m.leader));
            if m.joint >= n || m.leader >= n {
                return Err(RbdError::IndexOutOfRange { what: "mimic body", index: m.joint.max(m.leader), len: n });
            }
            if m.joint == m.leader {
                return Err(RbdError::InvalidModel(format!("{what}: a joint cannot mimic itself")));
            }
            for b in [m.joint, m.leader] {
                let j = &self.joints[b];
                if !(j.nq() == 1 && j.nv() == 1) {
                    return Err(RbdError::InvalidModel(format!(
                        "{what}: joint '{}' is {}; mimic joints and their leaders must be revolute or prismatic (one coordinate)",
                        name(b),
                        j.kind_name()
                    )));
                }
            }
            if !(m.multiplier.is_finite() && m.offset.is_finite()) {
                return Err(RbdError::InvalidModel(format!("{what}: multiplier {} and offset {} must be finite", m.multiplier, m.offset)));
            }
            if mimics[..k].iter().any(|o| o.joint == m.joint) {
                return Err(RbdError::InvalidModel(format!("{what}: the joint mimics two leaders")));
            }
            if let Some(chain) = mimics.iter().find(|o| o.joint == m.leader) {
                return Err(RbdError::InvalidModel(format!(
                    "{what}: its leader '{}' itself mimics '{}'; chains of mimic joints are not supported (make both follow '{}')",
                    name(m.leader),
                    name(chain.leader),
                    name(chain.leader)
                )));
            }
        }
        if !self.gimbals.is_empty() && !mimics.is_empty() {
            return Err(RbdError::InvalidModel("mimic joints on a model of Euler-angle chains (to_single_dof) are not supported".into()));
        }
        self.mimics = mimics;
        Ok(self)
    }

    /// The coupling of the model's mimic joints (the identity without any).
    #[must_use]
    pub fn coupling(&self) -> Coupling {
        Coupling::new(self)
    }

    /// An error naming `what` and the model's mimic joints when it has any: for the
    /// computations that do not take them.
    ///
    /// # Errors
    /// [`RbdError::InvalidModel`] when the model has mimic joints.
    pub fn refuse_mimics(&self, what: &str) -> Result<()> {
        match self.mimics.first() {
            None => Ok(()),
            Some(m) => Err(RbdError::InvalidModel(format!(
                "{what} does not support mimic joints, and model '{}' has {} (joint '{}' mimics '{}'{}); load the model with mimic=False to treat them as independent joints",
                self.name,
                self.mimics.len(),
                self.joint_names[m.joint],
                self.joint_names[m.leader],
                if self.mimics.len() > 1 { ", …" } else { "" }
            ))),
        }
    }
}

impl Coupling {
    /// The coupling of `model`'s mimic joints (validated by [`Model::with_mimics`]).
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let mut follows: Vec<Option<&Mimic>> = vec![None; model.nbodies()];
        for m in &model.mimics {
            follows[m.joint] = Some(m);
        }
        let identity = |column| Row { column, factor: 1.0, offset: 0.0 };
        let (mut q_rows, mut v_rows) = (vec![identity(0); model.nq], vec![identity(0); model.nv]);
        let (mut free_q, mut free_v) = (Vec::with_capacity(model.nq), Vec::with_capacity(model.nv));
        // the free coordinates first (a leader may follow its mimic in the tree order)
        for (b, joint) in model.joints.iter().enumerate().filter(|(b, _)| follows[*b].is_none()) {
            for e in model.idx_q[b]..model.idx_q[b] + joint.nq() {
                q_rows[e] = identity(free_q.len());
                free_q.push(e);
            }
            for e in model.idx_v[b]..model.idx_v[b] + joint.nv() {
                v_rows[e] = identity(free_v.len());
                free_v.push(e);
            }
        }
        let mut gram = vec![1.0; free_v.len()];
        for m in &model.mimics {
            let (q, v) = (q_rows[model.idx_q[m.leader]].column, v_rows[model.idx_v[m.leader]].column);
            q_rows[model.idx_q[m.joint]] = Row { column: q, factor: m.multiplier, offset: m.offset };
            v_rows[model.idx_v[m.joint]] = Row { column: v, factor: m.multiplier, offset: 0.0 };
            gram[v] += m.multiplier * m.multiplier;
        }
        Self { q_rows, v_rows, free_q, free_v, gram }
    }

    /// Reduced configuration size `nq`.
    #[must_use]
    pub fn nq(&self) -> usize {
        self.free_q.len()
    }

    /// Reduced velocity size `n`.
    #[must_use]
    pub fn nv(&self) -> usize {
        self.free_v.len()
    }

    /// Extended configuration size `nq_e` (the model's `nq`).
    #[must_use]
    pub fn nq_extended(&self) -> usize {
        self.q_rows.len()
    }

    /// Extended velocity size `n_e` (the model's `nv`).
    #[must_use]
    pub fn nv_extended(&self) -> usize {
        self.v_rows.len()
    }

    /// The reduced coordinate that extended configuration coordinate `e` follows (its own,
    /// or its leader's for a mimic joint's).
    #[must_use]
    pub fn configuration_column(&self, e: usize) -> usize {
        self.q_rows[e].column
    }

    /// The reduced velocity coordinate that extended one `e` follows.
    #[must_use]
    pub fn tangent_column(&self, e: usize) -> usize {
        self.v_rows[e].column
    }

    /// `(n,)` extended index of each reduced velocity coordinate.
    #[must_use]
    pub fn free_velocities(&self) -> &[usize] {
        &self.free_v
    }

    /// `q_e = G q + o`.
    pub fn lift_configuration(&self, q: &[f64], q_e: &mut [f64]) {
        for (x, r) in q_e.iter_mut().zip(&self.q_rows) {
            *x = r.factor * q[r.column] + r.offset;
        }
    }

    /// `v_e = G v` (velocities, accelerations, tangent displacements).
    pub fn lift_tangent(&self, v: &[f64], v_e: &mut [f64]) {
        for (x, r) in v_e.iter_mut().zip(&self.v_rows) {
            *x = r.factor * v[r.column];
        }
    }

    /// The least-norm `f_e` with `Gᵀ f_e = f`: `f_e = G (GᵀG)⁻¹ f` (generalised forces,
    /// momenta).
    pub fn lift_force(&self, f: &[f64], f_e: &mut [f64]) {
        for (x, r) in f_e.iter_mut().zip(&self.v_rows) {
            *x = r.factor * f[r.column] / self.gram[r.column];
        }
    }

    /// The free coordinates of an extended configuration (`q` with `q_e = G q + o` when
    /// `q_e` satisfies the coupling).
    pub fn restrict_configuration(&self, q_e: &[f64], q: &mut [f64]) {
        for (x, &e) in q.iter_mut().zip(&self.free_q) {
            *x = q_e[e];
        }
    }

    /// The free entries of an extended tangent vector (per-coordinate data such as limits).
    pub fn restrict_tangent(&self, v_e: &[f64], v: &mut [f64]) {
        for (x, &e) in v.iter_mut().zip(&self.free_v) {
            *x = v_e[e];
        }
    }

    /// `f = Gᵀ f_e` (generalised forces).
    pub fn reduce_force(&self, f_e: &[f64], f: &mut [f64]) {
        f.fill(0.0);
        for (x, r) in f_e.iter().zip(&self.v_rows) {
            f[r.column] += r.factor * x;
        }
    }

    /// `A = A_e G` (`A_e`: `(r, n_e)`, `A`: `(r, n)`; Jacobians).
    pub fn reduce_columns(&self, a_e: &DMatrix<f64>, a: &mut DMatrix<f64>) {
        a.fill(0.0);
        for (e, r) in self.v_rows.iter().enumerate() {
            a.column_mut(r.column).axpy(r.factor, &a_e.column(e), 1.0);
        }
    }

    /// `A = Gᵀ A_e G` (`(n_e, n_e)` → `(n, n)`, into a matrix or a view of one; mass
    /// matrices, derivatives of forces).
    pub fn reduce_matrix<S: StorageMut<f64, Dyn, Dyn>>(&self, a_e: &DMatrix<f64>, a: &mut Matrix<f64, Dyn, Dyn, S>) {
        a.fill(0.0);
        for (c, rc) in self.v_rows.iter().enumerate() {
            for (r, rr) in self.v_rows.iter().enumerate() {
                a[(rr.column, rc.column)] += rr.factor * rc.factor * a_e[(r, c)];
            }
        }
    }

    /// `T[a, b, c] = Σ G_ia G_jb G_kc T_e[i, j, k]` (`(n_e, n_e, n_e)` → `(n, n, n)`).
    pub fn reduce_tensor(&self, t_e: &Tensor3, t: &mut Tensor3) {
        t.fill(0.0);
        for (i, ri) in self.v_rows.iter().enumerate() {
            for (j, rj) in self.v_rows.iter().enumerate() {
                let w = ri.factor * rj.factor;
                for (k, rk) in self.v_rows.iter().enumerate() {
                    t[[ri.column, rj.column, rk.column]] += w * rk.factor * t_e[[i, j, k]];
                }
            }
        }
    }

    /// The dense `G` (`(n_e, n)`), for tests and users; the algorithms never form it.
    #[must_use]
    pub fn matrix(&self) -> DMatrix<f64> {
        let mut g = DMatrix::zeros(self.nv_extended(), self.nv());
        for (e, r) in self.v_rows.iter().enumerate() {
            g[(e, r.column)] = r.factor;
        }
        g
    }
}
