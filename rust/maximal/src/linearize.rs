//! Exact first-order linearisation of one step by the implicit function theorem, reusing the
//! graph factorisation of the Newton matrix at the solution.
//!
//! **State and tangent.** Per body the maximal state is `(z_k, ż_{k−1})`; its tangent has 12
//! coordinates `[δx (world); δθ (body, right, full angle); δv (world); δω (body)]`, body after
//! body, so `A` is `12 nb × 12 nb` and `B` is `12 nb × nu`.
//!
//! **Method.** The step solves `R(y; x, u) = 0` for `y = (ż_k, λ_k)` (module
//! [`crate::integrator`]), so `δy = −F⁻¹ (R_x δx + R_u δu)` with `F = ∂R/∂y`, the Newton matrix
//! already factorised on the graph (each column an O(n) solve; all columns O(n²)). `R_x` has:
//! `−m/Δt·1` and `−½(s J − Jω ωᵀ/s − ω×J + (Jω)×)` (at `ω_{k−1}`) from the previous velocity;
//! the constraint rows `G(z_{k+1})·[1, R(w)ᵀ]/Δt` (`δz_{k+1} = (δx, R(w)ᵀδθ)` at fixed `ż_k`,
//! `w` the step quaternion); the derivatives of the constraint wrenches `G(z_k)ᵀλ`
//! ([`crate::Constraint::wrench_jacobians`]) and of the joint-force wrenches
//! ([`crate::Mechanism::joint_wrench_jacobians`]); `R_u` is minus the wrench of each unit
//! generalised force. The new state is `z_{k+1} = z_k ⊕ Δt ż_k`:
//! `δx⁺ = δx + Δt δv⁺`, `δθ⁺ = R(w)ᵀ δθ + E(ω_k) δω⁺` ([`crate::body::update_tangent`]).
//!
//! Not yet: joint springs and dampers (their forces depend on the joint coordinates of
//! `z_k` and `z_{k−1}`); mechanisms with either are rejected with [`MaximalError::NotYet`].

use crate::body::{scalar_rate, step_quaternion, update_tangent, BodyState};
use crate::error::{MaximalError, Result};
use crate::integrator::{MaximalIntegrator, MaximalWorkspace, StepStats};
use nalgebra::{DMatrix, Matrix3, Matrix6, Vector6};
use vidyn_spatial::skew;

/// Adds `m` (6×6, rows `[force; torque]`, cols `[δx; δθ]`) times `sign` into the dense matrix
/// at `(row, col)`.
fn add_block(rx: &mut DMatrix<f64>, row: usize, col: usize, m: &Matrix6<f64>, rows: usize, sign: f64) {
    for r in 0..rows {
        for c in 0..6 {
            rx[(row + r, col + c)] += sign * m[(r, c)];
        }
    }
}

impl MaximalIntegrator {
    /// Solves the step from `state` under `u` (writing `next`) and its exact linearisation:
    /// `a = ∂x_{k+1}/∂x_k` (`12nb × 12nb`) and `b = ∂x_{k+1}/∂u_k` (`12nb × nu`) in the tangent
    /// coordinates of the module docs. O(n²) per step (one O(n) graph solve per column).
    pub fn linearize(&self, ws: &mut MaximalWorkspace, step: usize, state: &[BodyState], u: &[f64], next: &mut [BodyState], a: &mut DMatrix<f64>, b: &mut DMatrix<f64>) -> Result<StepStats> {
        let mech = &**self.mechanism();
        let (nb, nu, dt) = (mech.nbodies(), mech.nu, self.dt());
        let nx = 12 * nb;
        if a.shape() != (nx, nx) || b.shape() != (nx, nu) {
            return Err(MaximalError::InvalidParameter(format!("A is {:?} and B is {:?}; expected ({nx}, {nx}) and ({nx}, {nu})", a.shape(), b.shape())));
        }
        if mech.has_springs_or_dampers() {
            return Err(MaximalError::NotYet("linearisation with joint springs or dampers"));
        }
        let stats = self.step(ws, step, state, u, None, next)?;
        // the Newton matrix at the solution
        self.assemble(ws);
        ws.solver.factorize().map_err(|node| self.singular_pivot(node, step))?;
        let o = ws.solver.offsets();
        let total = o[o.len() - 1];
        let mut rx = DMatrix::zeros(total, nx + nu);
        for (i, s) in state.iter().enumerate() {
            let body = &mech.bodies[i];
            let (j, w) = (body.inertia, s.w);
            let sp = scalar_rate(&w, dt);
            let jw = j * w;
            let d_prev: Matrix3<f64> = (j * sp - jw * w.transpose() / sp - skew(&w) * j + skew(&jw)) * -0.5;
            for r in 0..3 {
                rx[(o[i] + r, 12 * i + 6 + r)] = -body.mass / dt;
                for c in 0..3 {
                    rx[(o[i] + 3 + r, 12 * i + 9 + c)] = d_prev[(r, c)];
                }
            }
        }
        let step_rot: Vec<Matrix3<f64>> = (0..nb).map(|i| step_quaternion(&ws.w[i], dt).map_or(Matrix3::identity(), |q| q.to_rotation_matrix().into_inner())).collect();
        for (jn, jt) in mech.joints.iter().enumerate() {
            let bodies = [jt.parent, Some(jt.child)];
            if let Some(node) = self.joint_node[jn] {
                let m = ws.solver.dim(node);
                // constraint rows: g(z_{k+1})/Δt with z_{k+1} = z_k ⊕ Δt ż_k at fixed ż_k
                let (ga, gb) = jt.constraint.jacobians(jt.parent.map(|p| &ws.next[p]), &ws.next[jt.child]);
                for (side, g) in [(0, ga), (1, gb)] {
                    let Some(bi) = bodies[side] else { continue };
                    let rot = g.fixed_view::<6, 3>(0, 3) * step_rot[bi].transpose();
                    for r in 0..m {
                        for c in 0..3 {
                            rx[(o[node] + r, 12 * bi + c)] += g[(r, c)] / dt;
                            rx[(o[node] + r, 12 * bi + 3 + c)] += rot[(r, c)] / dt;
                        }
                    }
                }
                // constraint wrenches −G(z_k)ᵀλ
                let wj = jt.constraint.wrench_jacobians(jt.parent.map(|p| &ws.now_poses()[p]), &ws.now_poses()[jt.child], ws.lambda[jn].as_slice());
                for (rs, row_body) in bodies.iter().enumerate() {
                    let Some(rb) = row_body else { continue };
                    for (cs, col_body) in bodies.iter().enumerate() {
                        let Some(cb) = col_body else { continue };
                        add_block(&mut rx, o[*rb], 12 * cb, &wj[rs][cs], 6, -1.0);
                    }
                }
            }
            // joint forces (controls): −∂W/∂z at fixed u, and −W per unit u
            if let Some((mj, iv)) = jt.minimal {
                let nv = mj.nv();
                let mut gen = [0.0; 6];
                for k in 0..nv {
                    gen[k] = u.get(iv + k).copied().unwrap_or(0.0);
                }
                if gen.iter().any(|&x| x != 0.0) {
                    let (jac, _) = mech.joint_wrench_jacobians(jn, ws.now_poses(), &gen[..nv]);
                    for (rs, row_body) in bodies.iter().enumerate() {
                        let Some(rb) = row_body else { continue };
                        for (cs, col_body) in bodies.iter().enumerate() {
                            let Some(cb) = col_body else { continue };
                            add_block(&mut rx, o[*rb], 12 * cb, &jac[rs][cs], 6, -1.0);
                        }
                    }
                }
                for k in 0..nv {
                    let mut unit = [0.0; 6];
                    unit[k] = 1.0;
                    let (_, (wa, wb)) = mech.joint_wrench_jacobians(jn, ws.now_poses(), &unit[..nv]);
                    for (side, w) in [(0, wa), (1, wb)] {
                        let Some(bi) = bodies[side] else { continue };
                        for r in 0..6 {
                            rx[(o[bi] + r, nx + iv + k)] -= w[r];
                        }
                    }
                }
            }
        }
        // one graph solve per column
        let mut rhs = vec![Vector6::zeros(); ws.solver.len()];
        let tangents: Vec<Matrix3<f64>> = (0..nb).map(|i| update_tangent(&ws.w[i], dt)).collect();
        for c in 0..nx + nu {
            for (k, r) in rhs.iter_mut().enumerate() {
                *r = Vector6::zeros();
                for i in 0..ws.solver.dim(k) {
                    r[i] = -rx[(o[k] + i, c)];
                }
            }
            ws.solver.solve(&mut rhs);
            let out = if c < nx { &mut *a } else { &mut *b };
            let col = if c < nx { c } else { c - nx };
            for i in 0..nb {
                let dv = rhs[i].fixed_rows::<3>(0).into_owned();
                let dw = rhs[i].fixed_rows::<3>(3).into_owned();
                let mut dx = dv * dt;
                let mut dth = tangents[i] * dw;
                if c < nx && c / 12 == i {
                    match c % 12 {
                        k @ 0..=2 => dx[k] += 1.0,
                        k @ 3..=5 => dth += step_rot[i].transpose().column(k - 3),
                        _ => {}
                    }
                }
                for r in 0..3 {
                    out[(12 * i + r, col)] = dx[r];
                    out[(12 * i + 3 + r, col)] = dth[r];
                    out[(12 * i + 6 + r, col)] = dv[r];
                    out[(12 * i + 9 + r, col)] = dw[r];
                }
            }
        }
        Ok(stats)
    }
}
