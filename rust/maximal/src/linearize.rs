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
//! Joint springs and dampers of 1-dof joints add `−W ⊗ ∂u/∂x`, `u = −κ(θ_k − θ_rest) −
//! d(θ_k − θ_{k−1})/Δt`, with `∇θ` the unit joint wrench at `z_k` and at
//! `z_{k−1} = z_k ⊖ Δt ż_{k−1}` (`δx_{k−1} = δx − Δt δv_{k−1}`,
//! `δθ_{k−1} = R(w)(δθ − E(ω_{k−1}) δω_{k−1})`). With joint limits the `μ`-relaxed
//! interior-point system is differentiated at its final `μ` (a design choice: the
//! complementarity system itself is not differentiable where a limit engages), with the
//! condensed rows of [`crate::contact`]; the same holds for contacts (cone contacts with the
//! exact Jacobian of their Jordan-product rows, [`crate::friction_cone`]; body–body contacts
//! with the derivatives of their contact frame, [`crate::body_contact`]). Near convergence the
//! condensed pivots carry `μ`-small slacks, so the block LDU without pivoting loses digits
//! (1 % in a tilted sliding-box test); every solve is then followed by three steps of
//! iterative refinement against the unfactorised matrix (a dense LU gives the same result).
//! Checked against central differences for sliding contacts on one and four corners and for
//! joint limits; the rotation derivative of the friction rows (`β_i ωᵀ[p×][R_kᵀd_i×]`) only
//! moves the sliding speed `ψ` in those cases and is not independently confirmed (a sticking
//! corner agreed to 4.5e-5, the resolution of differences of the 1e-10-accurate interior
//! point).

use crate::body::{scalar_rate, step_quaternion, update_tangent, BodyState};
use crate::error::{MaximalError, Result};
use crate::integrator::{MaximalIntegrator, MaximalWorkspace, StepStats};
use nalgebra::{DMatrix, Matrix3, Matrix6, Vector3, Vector6};
use vidyn_spatial::skew;
use vidyn_system::StepInput;

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
    /// Solves the step from `state` under `u` (writing `next`) and its exact linearisation
    /// (with contacts or limits: of the `μ`-relaxed system at the final barrier):
    /// `a = ∂x_{k+1}/∂x_k` (`12nb × 12nb`) and `b = ∂x_{k+1}/∂u_k` (`12nb × nu`) in the tangent
    /// coordinates of the module docs. O(n²) per step (one O(n) graph solve per column).
    // the step's three inputs and three outputs, each named as in `Self::step`
    #[allow(clippy::too_many_arguments)]
    pub fn linearize(
        &self,
        ws: &mut MaximalWorkspace,
        step: usize,
        state: &[BodyState],
        u: &[f64],
        next: &mut [BodyState],
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<StepStats> {
        let mech = &**self.mechanism();
        let (nb, nu, dt) = (mech.nbodies(), mech.nu, self.dt());
        let nx = 12 * nb;
        if a.shape() != (nx, nx) || b.shape() != (nx, nu) {
            return Err(MaximalError::InvalidParameter(format!("A is {:?} and B is {:?}; expected ({nx}, {nx}) and ({nx}, {nu})", a.shape(), b.shape())));
        }
        let stats = self.step(ws, step, state, u, None, next)?;
        // the Newton matrix at the solution (with limits: the μ-relaxed system at the final μ)
        let inequalities = mech.has_inequalities();
        self.assemble(ws);
        if inequalities {
            self.assemble_contacts(ws);
        }
        // with inequalities the condensed pivots hold μ-small entries (s, σ, η ~ μ/force): the
        // solves without pivoting lose digits, so each is refined against the unfactorised matrix
        let original = inequalities.then(|| ws.solver.clone());
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
        let step_rot: Vec<Matrix3<f64>> =
            (0..nb).map(|i| step_quaternion(&ws.w[i], dt).map_or(Matrix3::identity(), |q| q.to_rotation_matrix().into_inner())).collect();
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
                // springs and dampers of 1-dof joints: u_tot = u − κ(θ_k − θ_rest) − d(θ_k − θ_{k−1})/Δt
                let (kappa, damp) = if nv == 1 { (mech.stiffness[iv], mech.damping[iv]) } else { (0.0, 0.0) };
                let spring_damper = kappa != 0.0 || damp != 0.0;
                if spring_damper {
                    if let (Some(th), Some(th0)) = (mech.joint_coordinate(jn, ws.now_poses()), mech.joint_coordinate(jn, &ws.before)) {
                        let mut rate = th - th0;
                        if matches!(mj, vidyn_rbd::Joint::Revolute { .. }) {
                            rate = (rate + std::f64::consts::PI).rem_euclid(2.0 * std::f64::consts::PI) - std::f64::consts::PI;
                        }
                        gen[0] += -kappa * (th - mech.rest[iv]) - damp * rate / dt;
                    }
                    // −W_unit(z_k) ⊗ ∂u_tot/∂x with ∇θ = W_unit (the unit joint wrench is the
                    // gradient of θ on the joint manifold), at z_k and, through
                    // z_{k−1} = z_k ⊖ Δt ż_{k−1}, at z_{k−1}
                    let (_, (ga, gb)) = mech.joint_wrench_jacobians(jn, ws.now_poses(), &[1.0]);
                    let (_, (pa, pb)) = mech.joint_wrench_jacobians(jn, &ws.before, &[1.0]);
                    let mut du = nalgebra::DVector::<f64>::zeros(nx);
                    for (side, g_now, g_prev) in [(0, ga, pa), (1, gb, pb)] {
                        let Some(bi) = bodies[side] else { continue };
                        let w = state[bi].w;
                        let rw = step_quaternion(&w, dt).map_or(Matrix3::identity(), |q| q.to_rotation_matrix().into_inner());
                        let e = update_tangent(&w, dt);
                        let (gx, gth) = (g_prev.fixed_rows::<3>(0).into_owned(), g_prev.fixed_rows::<3>(3).into_owned());
                        let th_cols = rw.transpose() * gth;
                        let w_cols = -((rw * e).transpose() * gth);
                        for r in 0..3 {
                            du[12 * bi + r] += -(kappa + damp / dt) * g_now[r] + damp / dt * gx[r];
                            du[12 * bi + 3 + r] += -(kappa + damp / dt) * g_now[3 + r] + damp / dt * th_cols[r];
                            du[12 * bi + 6 + r] += damp / dt * (-dt * gx[r]);
                            du[12 * bi + 9 + r] += damp / dt * w_cols[r];
                        }
                    }
                    for (side, w) in [(0, ga), (1, gb)] {
                        let Some(bi) = bodies[side] else { continue };
                        for r in 0..6 {
                            for c in 0..nx {
                                rx[(o[bi] + r, c)] -= w[r] * du[c];
                            }
                        }
                    }
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
        if inequalities {
            self.inequality_jacobian(ws, &mut rx, &o);
            self.body_contact_jacobian(ws, &mut rx, &o)?;
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
            if let Some(f) = &original {
                let b0 = rhs.clone();
                ws.solver.solve(&mut rhs);
                let mut fx = vec![Vector6::zeros(); rhs.len()];
                for _ in 0..3 {
                    f.mul_vec(&rhs, &mut fx);
                    let mut r: Vec<Vector6<f64>> = b0.iter().zip(&fx).map(|(b, y)| b - y).collect();
                    ws.solver.solve(&mut r);
                    for (x, d) in rhs.iter_mut().zip(&r) {
                        *x += d;
                    }
                }
            } else {
                ws.solver.solve(&mut rhs);
            }
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

impl MaximalIntegrator {
    /// The step and its exact linearisation in minimal coordinates, for mechanisms built from a
    /// tree model of revolute and prismatic joints without loop closures. Minimal state:
    /// `(q_k, v_k)` with `v_k = (q_k − q_{k−1})/Δt` the joint velocities of the last interval
    /// (the state that [`crate::Mechanism::state_from_minimal`] turns into `(z_k, ż_{k−1})`),
    /// given as `at.q`, `at.p` (`at.guess` is not used). Writes `q_{k+1}`, `v_{k+1}` and `a = ∂(q_{k+1}, v_{k+1})/∂(q_k, v_k)` (`2n × 2n`),
    /// `b = ∂(q_{k+1}, v_{k+1})/∂u_k` (`2n × n`).
    ///
    /// `a = P A_max T`, `b = P B_max`: `T` maps `(δq, δv)` to the maximal tangent through the
    /// forward-kinematics Jacobian `J(q)` at `q_k` and `q_{k−1} = q_k − Δt v_k`
    /// (`δv_i = (δx_i(k) − δx_i(k−1))/Δt`, `δω_i = E(ω_i)⁻¹(δθ_i(k) − R(w_i)ᵀ δθ_i(k−1))`), and `P`
    /// maps back with the left inverse of `J` (exact on the joints' tangent space, where the
    /// step's outputs lie: every step satisfies the constraints at `z_{k+1}` exactly). Allocates
    /// (O(n²) scratch).
    pub fn linearize_minimal(
        &self,
        ws: &mut MaximalWorkspace,
        at: StepInput<'_>,
        q_next: &mut [f64],
        v_next: &mut [f64],
        a: &mut DMatrix<f64>,
        b: &mut DMatrix<f64>,
    ) -> Result<StepStats> {
        let StepInput { k: step, q, p: v, u, .. } = at;
        let mech = &**self.mechanism();
        let model = mech.require_model()?;
        let (n, nb, dt) = (model.nv, mech.nbodies(), self.dt());
        if mech.joints.len() != nb || model.joints.iter().any(|j| j.nv() != 1 || j.nq() != 1) {
            return Err(MaximalError::NotYet("minimal-coordinate linearisation of loops or of joints other than revolute and prismatic"));
        }
        if a.shape() != (2 * n, 2 * n) || b.shape() != (2 * n, n) || q_next.len() != n || v_next.len() != n {
            return Err(MaximalError::InvalidParameter(format!(
                "A is {:?}, B is {:?}, q_next/v_next have {}/{} entries; expected ({m}, {m}), ({m}, {n}), {n}, {n}",
                a.shape(),
                b.shape(),
                q_next.len(),
                v_next.len(),
                m = 2 * n
            )));
        }
        let mut state = vec![BodyState::default(); nb];
        mech.state_from_minimal(q, v, dt, &mut state)?;
        let mut next = state.clone();
        let (mut am, mut bm) = (DMatrix::zeros(12 * nb, 12 * nb), DMatrix::zeros(12 * nb, n));
        let stats = self.linearize(ws, step, &state, u, &mut next, &mut am, &mut bm)?;
        let q_prev: Vec<f64> = q.iter().zip(v).map(|(a, b)| a - dt * b).collect();
        let poses: Vec<crate::body::Pose> = next.iter().map(|s| s.pose).collect();
        mech.configuration(&poses, q_next)?;
        for i in 0..n {
            v_next[i] = (q_next[i] - q[i]) / dt;
        }
        let (j_now, j_prev, j_next) = (fk_jacobian(mech, q)?, fk_jacobian(mech, &q_prev)?, fk_jacobian(mech, q_next)?);
        // T: (δq, δv) → maximal tangent of (z_k, ż_{k−1})
        let mut t = DMatrix::zeros(12 * nb, 2 * n);
        for i in 0..nb {
            let w = state[i].w;
            let rw = step_quaternion(&w, dt).map_or(Matrix3::identity(), |s| s.to_rotation_matrix().into_inner());
            let e_inv = update_tangent(&w, dt).try_inverse().unwrap_or_else(Matrix3::zeros);
            for c in 0..n {
                let (xk, tk) = (j_now.fixed_view::<3, 1>(6 * i, c).into_owned(), j_now.fixed_view::<3, 1>(6 * i + 3, c).into_owned());
                let (xp, tp) = (j_prev.fixed_view::<3, 1>(6 * i, c).into_owned(), j_prev.fixed_view::<3, 1>(6 * i + 3, c).into_owned());
                // δq_c: both knots move; δv_c: only the previous knot, by −Δt J(q_{k−1})
                let cols = [(c, xk, tk, xp, tp), (n + c, Vector3::zeros(), Vector3::zeros(), -xp * dt, -tp * dt)];
                for (col, dxk, dtk, dxp, dtp) in cols {
                    let dv = (dxk - dxp) / dt;
                    let dw = e_inv * (dtk - rw.transpose() * dtp);
                    for r in 0..3 {
                        t[(12 * i + r, col)] = dxk[r];
                        t[(12 * i + 3 + r, col)] = dtk[r];
                        t[(12 * i + 6 + r, col)] = dv[r];
                        t[(12 * i + 9 + r, col)] = dw[r];
                    }
                }
            }
        }
        // P: maximal tangent of (z_{k+1}, ż_k) → (δq_{k+1}, δv_{k+1})
        let left = |j: &DMatrix<f64>| -> Result<DMatrix<f64>> {
            let jt = j.transpose();
            (&jt * j).try_inverse().map(|m| m * jt).ok_or(MaximalError::InvalidParameter("the forward-kinematics Jacobian is rank deficient".to_string()))
        };
        let (l_next, l_now) = (left(&j_next)?, left(&j_now)?);
        let mut p = DMatrix::zeros(2 * n, 12 * nb);
        let mut dz_next = DMatrix::zeros(6 * nb, 12 * nb);
        let mut dz_now = DMatrix::zeros(6 * nb, 12 * nb);
        for i in 0..nb {
            let w = next[i].w;
            let rw = step_quaternion(&w, dt).map_or(Matrix3::identity(), |s| s.to_rotation_matrix().into_inner());
            let e = update_tangent(&w, dt);
            for r in 0..3 {
                dz_next[(6 * i + r, 12 * i + r)] = 1.0;
                dz_next[(6 * i + 3 + r, 12 * i + 3 + r)] = 1.0;
                // z_k = z_{k+1} ⊖ Δt ż_k: δx_k = δx⁺ − Δt δv⁺, δθ_k = R(w)(δθ⁺ − E δω⁺)
                dz_now[(6 * i + r, 12 * i + r)] = 1.0;
                dz_now[(6 * i + r, 12 * i + 6 + r)] = -dt;
                for c in 0..3 {
                    dz_now[(6 * i + 3 + r, 12 * i + 3 + c)] = rw[(r, c)];
                    dz_now[(6 * i + 3 + r, 12 * i + 9 + c)] = -(rw * e)[(r, c)];
                }
            }
        }
        let dq_next = &l_next * &dz_next;
        let dq_now = &l_now * &dz_now;
        p.view_mut((0, 0), (n, 12 * nb)).copy_from(&dq_next);
        p.view_mut((n, 0), (n, 12 * nb)).copy_from(&((&dq_next - &dq_now) / dt));
        a.copy_from(&(&p * &am * &t));
        b.copy_from(&(&p * &bm));
        Ok(stats)
    }
}

/// Forward-kinematics Jacobian `∂z/∂q` (`6 nb × n`, rows `[δx (world); δθ (body)]` per body) of a
/// tree of revolute and prismatic joints: joint `j` with world axis `a_j` through its origin
/// `p_j` moves each body `i` of its subtree by `δx_i = a_j × (x_i − p_j)`, `δθ_i = R_iᵀ a_j`
/// (revolute) or `δx_i = a_j`, `δθ_i = 0` (prismatic).
fn fk_jacobian(mech: &crate::Mechanism, q: &[f64]) -> Result<DMatrix<f64>> {
    let model = mech.require_model()?;
    let mut ws = model.workspace();
    vidyn_rbd::placements(model, &mut ws, q)?;
    let nb = model.nbodies();
    let mut j = DMatrix::zeros(6 * nb, model.nv);
    for i in 0..nb {
        let oi = &ws.placements[i];
        let xi = oi.act_point(&mech.com[i]);
        let mut k = Some(i);
        while let Some(jn) = k {
            let oj = &ws.placements[jn];
            let col = model.idx_v[jn];
            match model.joints[jn] {
                vidyn_rbd::Joint::Revolute { axis } => {
                    let a = oj.rotation * axis;
                    let dx = a.cross(&(xi - oj.translation));
                    let dth = oi.rotation.transpose() * a;
                    for r in 0..3 {
                        j[(6 * i + r, col)] = dx[r];
                        j[(6 * i + 3 + r, col)] = dth[r];
                    }
                }
                vidyn_rbd::Joint::Prismatic { axis } => {
                    let a = oj.rotation * axis;
                    for r in 0..3 {
                        j[(6 * i + r, col)] = a[r];
                    }
                }
                _ => return Err(MaximalError::NotYet("minimal-coordinate linearisation of joints other than revolute and prismatic")),
            }
            k = model.parents[jn];
        }
    }
    Ok(j)
}

#[cfg(test)]
mod tests;
