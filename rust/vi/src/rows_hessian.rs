//! The Hessian in the control points of a weighted sum of DEL rows, `φ(Q) = Σ_x ω_x · row_x(Q)`
//! with constant weights `ω` — the part of every second-order derivative of a step that comes
//! from the discrete Lagrangian (module `second_order`, and on the Lie group module
//! `chart_second_order`, where the weights are then corrected for their own variation).
//!
//! The DEL row of step variable `x` is `Σ_α mix[x][α] (D_α L_d + Q^α)` ([`crate::Scheme::mix`]),
//! `D_β L_d = Δt Σ_α w_α (δ_αβ L_q + (b[α][β]/Δt) L_q̇)(q^α, q̇^α)`, and the forces `Q^α`
//! (controls, damping, springs) are linear in `Q`. So with `W_α = Σ_x mix[x][α] ω_x` and
//! `V_α = Σ_β b[α][β] W_β`, `φ = Σ_α w_α (Δt W_α·L_q + V_α·L_q̇)(q^α, q̇^α) + linear terms`: a
//! sum over control points of directional derivatives of `L` along `(Δt W_α, V_α)`. Its
//! Hessian in `(q^α, q̇^α)` is `G_α = w_α d/dε ∇²L(q^α + ε Δt W_α, q̇^α + ε V_α)`, the energy
//! Hessians of Fan, Schultz & Murphey (2018, Algorithms 2–3) differentiated once along one
//! direction, which module `dual` computes exactly by forward-mode AD in O(n·d). With
//! `q̇^α = (1/Δt) Σ_β b[α][β] q^β`, `∇²_Q φ = Σ_α C_αᵀ G_α C_α` (`C_α` the map
//! `Q ↦ (q^α, q̇^α)`). Body wrenches are not carried (their generalised forces are not linear
//! in `Q`): the callers refuse them.

use crate::del::StepPoints;
use crate::dual::DualHessians;
use crate::hessians::EnergyHessians;
use crate::scheme::Scheme;
use nalgebra::DMatrix;
use vidyn_rbd::Model;

/// Scratch of [`RowsHessian::fill`] for a model with `n` coordinates and a scheme with
/// `points` control points. O(points·n + n²) numbers.
#[derive(Clone, Debug)]
pub(crate) struct RowsHessian {
    /// `W_α`, `V_α` (`(points·n,)`) and one direction `Δt W_α` `(n,)`.
    wdir: Vec<f64>,
    vdir: Vec<f64>,
    dq: Vec<f64>,
    dual: DualHessians,
    third: EnergyHessians,
    /// `(n, n)` the transpose of `third.kvq`.
    kvq_t: DMatrix<f64>,
}

impl RowsHessian {
    pub(crate) fn new(n: usize, points: usize) -> Self {
        Self {
            wdir: vec![0.0; points * n],
            vdir: vec![0.0; points * n],
            dq: vec![0.0; n],
            dual: DualHessians::new(n),
            third: EnergyHessians::new(n),
            kvq_t: DMatrix::zeros(n, n),
        }
    }

    /// `cmat = ∇²_Q φ` (`(points·n)²`, block `(β, β')` = `∂²φ/∂q^β∂q^β'`) for the weights
    /// `omega` `(points·n,)` (block `x` = `ω_x`) at the control points of `pts` (module docs).
    /// O(points·n·d + points³·n²), no allocation.
    pub(crate) fn fill(&mut self, model: &Model, pts: &StepPoints, sc: &Scheme, dt: f64, omega: &[f64], cmat: &mut DMatrix<f64>) {
        let n = model.nv;
        let np = sc.points();
        for al in 0..np {
            for i in 0..n {
                self.wdir[al * n + i] = (0..=al).map(|x| sc.mix(x, al) * omega[x * n + i]).sum();
            }
        }
        for al in 0..np {
            for i in 0..n {
                self.vdir[al * n + i] = (0..np).map(|be| sc.b(al, be) * self.wdir[be * n + i]).sum();
            }
        }
        cmat.fill(0.0);
        let placements = pts.joint_placements(model);
        for al in 0..np {
            let wa = sc.weights[al];
            if wa == 0.0 {
                continue;
            }
            for i in 0..n {
                self.dq[i] = dt * self.wdir[al * n + i];
            }
            self.dual.update(model, placements, &pts.q[al], &pts.qdot[al], &self.dq, &self.vdir[al * n..(al + 1) * n]);
            self.dual.dual_parts(&mut self.third);
            // L_qq = K_qq − V_qq in place, and K_q̇qᵀ, so that every block below is a
            // combination of contiguous columns
            self.third.kqq -= &self.third.vqq;
            self.third.kvq.transpose_to(&mut self.kvq_t);
            let (t, ld) = (&self.third, np * n);
            for be in 0..np {
                let (qa, ca) = (if be == al { 1.0 } else { 0.0 }, sc.b(al, be) / dt);
                for be2 in 0..np {
                    let (qb, cb) = (if be2 == al { 1.0 } else { 0.0 }, sc.b(al, be2) / dt);
                    let (cqq, cqv, cvq, cvv) = (wa * qa * qb, wa * qa * cb, wa * ca * qb, wa * ca * cb);
                    if cqq == 0.0 && cqv == 0.0 && cvq == 0.0 && cvv == 0.0 {
                        continue;
                    }
                    for c in 0..n {
                        let col = &mut cmat.as_mut_slice()[(be2 * n + c) * ld + be * n..][..n];
                        let cols = c * n..(c + 1) * n;
                        let (lqq, kvqt, kvq, kvv) =
                            (&t.kqq.as_slice()[cols.clone()], &self.kvq_t.as_slice()[cols.clone()], &t.kvq.as_slice()[cols.clone()], &t.kvv.as_slice()[cols]);
                        for r in 0..n {
                            col[r] += cqq * lqq[r] + cqv * kvqt[r] + cvq * kvq[r] + cvv * kvv[r];
                        }
                    }
                }
            }
        }
    }
}
