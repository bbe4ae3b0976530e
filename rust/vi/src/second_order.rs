//! Exact second-order derivatives of the one-step flow map
//! `f: (x_k, u_k) = (q_k, p_k, u_k) ↦ x_{k+1} = (q_{k+1}, p_{k+1})`, as full tensors and
//! contracted with a co-state `λ` (the form DDP needs).
//!
//! # The maths
//! Write `y = (q_k, p_k, u_k)` (`3n` inputs), `z = (q^1, …, q^s)` the unknown control points
//! and `Q = (q^0 = q_k, z)` all of them. The DEL rows `R(Q, p_k, u) = 0` (`s·n` rows, module
//! `del`), the momentum `p_{k+1} = P(Q, u)` (the row of step variable `s`) and
//! `q_{k+1} = Σ_α endpoint[α] q^α` are *linear* in `p_k`, `u` and (for the endpoint) in `Q`;
//! damping and springs are linear in `Q` too. So every second derivative comes from the
//! discrete Lagrangian through `Q`, and by the implicit-function theorem (the second-order
//! form of the first-order derivation in the Fan et al. 2018 digest §6.5; Johnson 2012 eqs.
//! 4.24–4.35 give the same structure for the midpoint rule):
//! * first order: `Q_y = ∂Q/∂y`, with `q^0_y = [1 0 0]` and `z_y = −J⁻¹ ∂R/∂y`;
//! * second order, along inputs `a, b`: `J z_ab = −R''[Q_a, Q_b]`, and
//!   `q_{k+1,ab} = Σ_γ endpoint[γ] z_γ,ab`, `p_{k+1,ab} = P''[Q_a, Q_b] + P_z z_ab`.
//!
//! Contracted with `λ = (λ_q, λ_p)` and with the adjoint `μ` of `Jᵀ μ = E_zᵀ λ_q + P_zᵀ λ_p`
//! (`E_z` the endpoint's `z` blocks), `Σ_i λ_i f_i,ab = φ''[Q_a, Q_b]` for the scalar
//! `φ(Q) = λ_p·P(Q) − μ·R(Q) = Σ_x ω_x · row_x(Q)` with `ω = (−μ, λ_p)` on the step variables
//! `x = 0..s`: the forces being linear in `Q`, its Hessian `∇²_Q φ` comes from third
//! derivatives of `L` along one direction per control point (module `rows_hessian`), and
//! finally `H = Q_yᵀ (∇²_Q φ) Q_y` (3n × 3n), split into `H_xx`, `H_xu`, `H_uu`.
//!
//! The full tensors are the contracted form for `λ = e_i`, one output `i` at a time.
//!
//! # On the Lie group
//! With free-flyer, spherical or planar joints the same outputs come from module
//! `chart_second_order`, in the tangent coordinates of the first-order linearisation (the
//! second derivatives of `δ ↦ f(x̄ ⊕ δ, ū + δu) ⊖ f(x̄, ū)`, the map DDP on a manifold
//! expands): the same implicit-function theorem written in one fixed chart of the centred
//! expansion, with the chart maps' own second derivatives. Exact to rounding.
//!
//! # With holonomic constraints
//! The step's multipliers, the constraint rows and the closing momentum projection join the
//! unknowns of the same implicit-function theorem: module `constrained_second_order` on fixed
//! charts, module `chart_second_order` (its `constrained` part) on the Lie group. Contact
//! schedules (touchdown steps included) are the same systems with the step's active set.
//!
//! # Cost (n dofs, s + 1 control points, per step)
//! Solving the step as [`VariationalIntegrator::step`]; then the energy Hessians at the
//! control points, O(s n d); the dense `sn × sn` DEL Jacobian `J` and its LU, O(s³ n³)/3
//! (cheap next to the products below for the sizes of interest, e.g. 21k multiply–adds at
//! n = 40, s = 1; the B.1 factorisation of `crate::newton_direction` has no transposed
//! solve, which the adjoint needs); `Q_y` by `3n` LU solves, O(s² n³); `A`, `B` by one
//! product; then per contraction one transposed solve O(s² n²), `s + 1` dual Hessian
//! evaluations O(s n d), the `(s+1)n × (s+1)n` matrix `∇²_Q φ` O(s³ n²) and
//! `Q_yᵀ (∇²_Q φ) Q_y` with `Q_y = [E; Z]` (`E = [1 0 0]`, so only `Z` needs products):
//! `(3s² + 7.5s) n³` multiply–adds (`C₀z Z`, `C_zz Z` and the upper half of `Zᵀ (C_zz Z)`).
//! The full tensors repeat the contraction for the `2n` outputs: O(s² n⁴). Nothing allocates
//! after the workspace exists, except the full tensors' storage on the first full call.

use crate::chart_second_order::GroupSecondOrder;
use crate::constrained_second_order::ConstrainedSecondOrder;
use crate::del::assemble_jacobian;
use crate::dense::{gemm_nn, lu_factor, lu_solve, lu_solve_transposed, ColMajor, ColMajorMut};
use crate::error::{Result, ViError};
use crate::integrator::{VariationalIntegrator, ViWorkspace};
use crate::rows_hessian::RowsHessian;
use crate::trajectory::Trajectory;
use nalgebra::DMatrix;
use rayon::prelude::*;
use vidyn_system::StepInput;

/// Derivatives of one step, stored in a [`SecondOrderWorkspace`] and returned by reference.
///
/// Both [`VariationalIntegrator::linearize_second_order`] and
/// [`VariationalIntegrator::linearize_second_order_contracted`] fill `a`, `b`, `q_next`,
/// `p_next` and `iterations`; the first fills `fxx`, `fxu`, `fuu`, the second `hxx`, `hxu`,
/// `huu`. Tensors are C order `[i, j, k] = ∂²x_{k+1,i}/∂y_j∂y'_k` (`i` the output; `j`, `k` the
/// two inputs, symmetric where both are states).
#[derive(Clone, Debug)]
pub struct FlowDerivatives {
    /// `A = ∂x_{k+1}/∂x_k`, (2n, 2n).
    pub a: DMatrix<f64>,
    /// `B = ∂x_{k+1}/∂u_k`, (2n, n).
    pub b: DMatrix<f64>,
    /// `Σ_i λ_i ∂²x_{k+1,i}/∂x_k²`, (2n, 2n).
    pub hxx: DMatrix<f64>,
    /// `Σ_i λ_i ∂²x_{k+1,i}/∂x_k∂u_k`, (2n, n): row = state, column = control.
    pub hxu: DMatrix<f64>,
    /// `Σ_i λ_i ∂²x_{k+1,i}/∂u_k²`, (n, n).
    pub huu: DMatrix<f64>,
    /// `(2n, 2n, 2n)` C order, `fxx[(i·2n + j)·2n + k] = ∂²x_{k+1,i}/∂x_j∂x_k` (empty until
    /// the first full call).
    pub fxx: Vec<f64>,
    /// `(2n, 2n, n)` C order, `fxu[(i·2n + j)·n + k] = ∂²x_{k+1,i}/∂x_j∂u_k`.
    pub fxu: Vec<f64>,
    /// `(2n, n, n)` C order, `fuu[(i·n + j)·n + k] = ∂²x_{k+1,i}/∂u_j∂u_k`.
    pub fuu: Vec<f64>,
    /// `(n,)` the next state.
    pub q_next: Vec<f64>,
    pub p_next: Vec<f64>,
    /// Newton iterations of the step.
    pub iterations: usize,
}

/// Per-thread scratch of the second-order derivatives (create with
/// [`VariationalIntegrator::second_order_workspace`]). Holds the integrator's own
/// [`ViWorkspace`], the λ-independent data of the last prepared step and the results
/// ([`FlowDerivatives`]).
#[derive(Clone, Debug)]
pub struct SecondOrderWorkspace {
    vi: ViWorkspace,
    /// Whether the fields below hold a step prepared by `second_order_prepare`.
    prepared: bool,
    /// `(s·n, s·n)` DEL Jacobian, then its LU factors.
    jac: DMatrix<f64>,
    pivots: Vec<usize>,
    /// `((s+1)·n, 3n)` control-point sensitivities `Q_y` (row block α = `∂q^α/∂y`).
    pub(crate) qy: DMatrix<f64>,
    /// `(n, (s+1)·n)` the momentum row's blocks `∂P/∂q^β`.
    pq: DMatrix<f64>,
    /// `(n, 3n)` `Σ_β ∂P/∂q^β Q_y,β`.
    prow: DMatrix<f64>,
    /// `(s·n,)` adjoint `μ`; `((s+1)·n,)` the rows' weights `ω`.
    adjoint: Vec<f64>,
    omega: Vec<f64>,
    /// The Hessian of the weighted rows (module `rows_hessian`).
    rows: RowsHessian,
    /// `((s+1)·n, (s+1)·n)` `C = ∇²_Q φ`; `(s·n, 3n)` `C_zz Z`; `(n, 3n)` `C₀z Z`; `(3n, 3n)`
    /// the contraction.
    pub(crate) cmat: DMatrix<f64>,
    xmat: DMatrix<f64>,
    tmat: DMatrix<f64>,
    /// `(3n, s·n)` `Zᵀ`.
    zt: DMatrix<f64>,
    pub(crate) hmat: DMatrix<f64>,
    /// `(2n,)` a unit co-state for the full tensors.
    unit: Vec<f64>,
    out: FlowDerivatives,
    /// With free-flyer, spherical or planar joints: the second order on the group (module
    /// `chart_second_order`), which replaces everything above but `out`, `hmat`, `unit`.
    pub(crate) group: Option<Box<GroupSecondOrder>>,
    /// With holonomic constraints (and no composite joints): the second order through the
    /// constrained step and its momentum projection (module `constrained_second_order`), which
    /// likewise replaces everything above but `out`, `hmat`, `unit`.
    constrained: Option<Box<ConstrainedSecondOrder>>,
}

impl SecondOrderWorkspace {
    /// Starts the multipliers of the next step solved in this workspace at `lambda` (`(s·m,)`,
    /// [`ViWorkspace::guess_multipliers`]): with the step's `q_{k+1}` as its guess, a re-solve
    /// of a step solved before takes no Newton iteration.
    pub fn guess_multipliers(&mut self, lambda: &[f64]) {
        self.vi.guess_multipliers(lambda);
    }
}

impl VariationalIntegrator {
    /// Fresh scratch for [`Self::linearize_second_order`] and
    /// [`Self::linearize_second_order_contracted`]: O(s² n²) numbers (the full tensors,
    /// 18 n³, are allocated by the first full call).
    #[must_use]
    pub fn second_order_workspace(&self) -> SecondOrderWorkspace {
        let (n, s) = (self.n(), self.scheme().s);
        let np = (s + 1) * n;
        SecondOrderWorkspace {
            vi: self.workspace(),
            prepared: false,
            jac: DMatrix::zeros(s * n, s * n),
            pivots: vec![0; s * n],
            qy: DMatrix::zeros(np, 3 * n),
            pq: DMatrix::zeros(n, np),
            prow: DMatrix::zeros(n, 3 * n),
            adjoint: vec![0.0; s * n],
            omega: vec![0.0; np],
            rows: RowsHessian::new(n, np),
            cmat: DMatrix::zeros(np, np),
            xmat: DMatrix::zeros(s * n, 3 * n),
            tmat: DMatrix::zeros(n, 3 * n),
            zt: DMatrix::zeros(3 * n, s * n),
            hmat: DMatrix::zeros(3 * n, 3 * n),
            unit: vec![0.0; 2 * n],
            out: FlowDerivatives {
                a: DMatrix::zeros(2 * n, 2 * n),
                b: DMatrix::zeros(2 * n, n),
                hxx: DMatrix::zeros(2 * n, 2 * n),
                hxu: DMatrix::zeros(2 * n, n),
                huu: DMatrix::zeros(n, n),
                fxx: Vec::new(),
                fxu: Vec::new(),
                fuu: Vec::new(),
                q_next: vec![0.0; self.nq()],
                p_next: vec![0.0; n],
                iterations: 0,
            },
            group: self.chart.as_deref().map(|chart| Box::new(GroupSecondOrder::new(self, chart))),
            constrained: (self.chart.is_none() && !self.constraints.is_empty()).then(|| Box::new(ConstrainedSecondOrder::new(n, s, self.constraints.len()))),
        }
    }

    /// Solves the step from `(q, p, u)` and computes `A`, `B` and the control-point
    /// sensitivities `Q_y` (module docs): `J` is formed and factored densely. Leaves the
    /// points of `so.vi` at the solution.
    pub(crate) fn second_order_prepare(&self, so: &mut SecondOrderWorkspace, at: StepInput<'_>) -> Result<()> {
        self.refuse_mimic("second-order derivatives")?;
        let (n, sc, dt, forces, model) = (self.n(), self.scheme(), self.dt(), self.forces(), &*self.model);
        let s = sc.s;
        so.prepared = false;
        if let Some(features) = self.second_order_gaps() {
            return Err(ViError::NoSecondOrder { features });
        }
        if let Some(constrained) = so.constrained.as_deref_mut() {
            so.out.iterations = constrained.prepare(self, &mut so.vi, at, &mut so.out)?;
            so.prepared = true;
            return Ok(());
        }
        if let (Some(group), Some(chart)) = (so.group.as_deref_mut(), self.chart.as_deref()) {
            so.out.iterations = group.prepare(self, chart, &mut so.vi, at, &mut so.out)?;
            so.prepared = true;
            return Ok(());
        }
        so.out.iterations = self.step(&mut so.vi, at, &mut so.out.q_next, &mut so.out.p_next)?;
        let StepInput { k: step, q, .. } = at;
        let pts = &mut so.vi.points;
        pts.set(model, sc, dt, q, &so.vi.z, &self.wrenches);
        pts.update_hessians(model);
        assemble_jacobian(pts, sc, dt, forces, n, &mut so.jac);
        if !lu_factor(&mut so.jac, &mut so.pivots) {
            return Err(ViError::SingularJacobian { step });
        }
        // Q_y: block 0 is ∂q_k/∂y = [1 0 0]; blocks 1..s hold −∂R/∂y, then J⁻¹ of it
        let qy = &mut so.qy;
        qy.fill(0.0);
        for i in 0..n {
            qy[(i, i)] = 1.0;
            qy[(n + i, n + i)] = -1.0; // ∂R^0/∂p_k = 1
        }
        for rho in 0..s {
            let mut blk = qy.view_mut((n + rho * n, 0), (n, n));
            pts.del_block(sc, dt, forces, rho, 0, &mut blk);
            blk.neg_mut();
            let cw = -sc.control_weight(rho) * dt;
            for i in 0..n {
                qy[(n + rho * n + i, 2 * n + i)] = cw;
            }
        }
        for c in 0..3 * n {
            let mut col = qy.column_mut(c);
            lu_solve(&so.jac, &so.pivots, &mut col.as_mut_slice()[n..]);
        }
        for beta in 0..=s {
            pts.del_block(sc, dt, forces, s, beta, &mut so.pq.view_mut((0, beta * n), (n, n)));
        }
        // A, B: q_{k+1} = Σ_α endpoint[α] q^α, p_{k+1} = P(Q, u)
        // Σ_β ∂P/∂q^β Q_y,β = [∂P/∂q^0, 0, 0] + P_z Z
        let ld = (s + 1) * n;
        so.prow.fill(0.0);
        so.prow.view_mut((0, 0), (n, n)).copy_from(&so.pq.view((0, 0), (n, n)));
        gemm_nn(n, 3 * n, s * n, ColMajor(&so.pq.as_slice()[n * n..], n), ColMajor(&so.qy.as_slice()[n..], ld), ColMajorMut(so.prow.as_mut_slice(), n));
        let cw = sc.control_weight(s) * dt;
        let (qy, a, b) = (&so.qy, &mut so.out.a, &mut so.out.b);
        for c in 0..3 * n {
            let (m, col) = if c < 2 * n { (&mut *a, c) } else { (&mut *b, c - 2 * n) };
            for r in 0..n {
                m[(r, col)] = (0..=s).map(|al| sc.endpoint(al) * qy[(al * n + r, c)]).sum();
                m[(n + r, col)] = so.prow[(r, c)] + if c == 2 * n + r { cw } else { 0.0 };
            }
        }
        so.prepared = true;
        Ok(())
    }

    /// What this integrator has that its second-order derivatives do not cover (`None`: they
    /// cover it all). The implicit-function theorem of this module and of its two variants has
    /// no prescribed points, and the third derivatives (forward-mode AD of the energy Hessians)
    /// carry no wrench term: refuse rather than return the derivatives of a different map.
    pub(crate) fn second_order_gaps(&self) -> Option<String> {
        let features: Vec<&str> = [(self.prescribed.iter().any(|&k| k), "kinematic joints"), (!self.wrenches.is_empty(), "body wrenches")]
            .into_iter()
            .filter_map(|(has, name)| has.then_some(name))
            .collect();
        (!features.is_empty()).then(|| features.join(" and "))
    }

    /// `so.hmat = Σ_i λ_i ∂²f_i/∂y²` (3n × 3n) at the prepared step (module docs).
    pub(crate) fn second_order_contract(&self, so: &mut SecondOrderWorkspace, lam: &[f64]) -> Result<()> {
        if let Some(constrained) = so.constrained.as_deref_mut() {
            return constrained.contract(self, &mut so.vi, lam, &mut so.hmat);
        }
        if let (Some(group), Some(chart)) = (so.group.as_deref_mut(), self.chart.as_deref()) {
            return group.contract(self, chart, lam, &so.out.a, &mut so.hmat);
        }
        let (n, sc, dt, model) = (self.n(), self.scheme(), self.dt(), &*self.model);
        let (s, np) = (sc.s, sc.points());
        let (lq, lp) = lam.split_at(n);
        // adjoint: Jᵀ μ = E_zᵀ λ_q + P_zᵀ λ_p
        for g in 1..=s {
            for i in 0..n {
                let pz: f64 = (0..n).map(|r| so.pq[(r, g * n + i)] * lp[r]).sum();
                so.adjoint[(g - 1) * n + i] = sc.endpoint(g) * lq[i] + pz;
            }
        }
        lu_solve_transposed(&so.jac, &so.pivots, &mut so.adjoint);
        // ω = (−μ, λ_p) on the step variables; ∇²_Q φ (module `rows_hessian`)
        for (o, m) in so.omega.iter_mut().zip(&so.adjoint) {
            *o = -m;
        }
        so.omega[s * n..].copy_from_slice(lp);
        so.rows.fill(model, &so.vi.points, sc, dt, &so.omega, &mut so.cmat);
        // H = Q_yᵀ C Q_y with Q_y = [E; Z], E = [1 0 0]:
        // H = Eᵀ C₀₀ E + (T = C₀z Z in the q_k rows) + Tᵀ (in the q_k columns) + Zᵀ C_zz Z
        let (ld, m3, sn) = (np * n, 3 * n, s * n);
        let z = &so.qy.as_slice()[n..];
        so.tmat.fill(0.0);
        gemm_nn(n, m3, sn, ColMajor(&so.cmat.as_slice()[ld * n..], ld), ColMajor(z, ld), ColMajorMut(so.tmat.as_mut_slice(), n));
        so.xmat.fill(0.0);
        gemm_nn(sn, m3, sn, ColMajor(&so.cmat.as_slice()[ld * n + n..], ld), ColMajor(z, ld), ColMajorMut(so.xmat.as_mut_slice(), sn));
        // H = Zᵀ Y through the stored transpose of Z (a plain product, register-blocked)
        for j in 0..m3 {
            for r in 0..sn {
                so.zt[(j, r)] = z[j * ld + r];
            }
        }
        // (symmetric: only the block upper triangle, 4 columns at a time, then mirrored)
        so.hmat.fill(0.0);
        for jb in (0..m3).step_by(4) {
            let w = 4.min(m3 - jb);
            gemm_nn(
                jb + w,
                w,
                sn,
                ColMajor(so.zt.as_slice(), m3),
                ColMajor(&so.xmat.as_slice()[jb * sn..], sn),
                ColMajorMut(&mut so.hmat.as_mut_slice()[jb * m3..], m3),
            );
        }
        let h = &mut so.hmat;
        for j in 0..m3 {
            for i in j + 1..m3 {
                h[(i, j)] = h[(j, i)];
            }
        }
        for j in 0..m3 {
            for i in 0..n {
                let t = so.tmat[(i, j)];
                h[(i, j)] += t;
                h[(j, i)] += t;
            }
        }
        for j in 0..n {
            for i in 0..n {
                h[(i, j)] += so.cmat[(i, j)];
            }
        }
        Ok(())
    }

    /// Exact first- and second-order derivatives of the step from `(q, p, u)`, the second
    /// contracted with the co-state `lambda` `(2n,)` = `(λ_q, λ_p)` on the next state:
    /// `hxx = Σ_i λ_i ∂²x_{k+1,i}/∂x_k²` (2n × 2n), `hxu` (2n × n, row = state, column =
    /// control) and `huu` (n × n), plus `A`, `B` and the next state (see [`FlowDerivatives`]).
    /// This is the term `V'_x · f_xx` (etc.) of DDP's `Q_xx`, `Q_xu`, `Q_uu`.
    ///
    /// Method (module docs): implicit-function theorem, one adjoint (transposed) solve with
    /// the DEL Jacobian, then the residual's second derivatives contracted with the adjoint
    /// (third derivatives of `L` along one direction per control point, by forward-mode AD),
    /// projected on the control-point sensitivities. Exact to rounding. Cost O(s² n³) per
    /// step, O(n²) memory; no allocation after the workspace exists. With free-flyer,
    /// spherical or planar joints: in tangent coordinates (module docs, "On the Lie group"),
    /// at about the same cost. `at` as for
    /// [`Self::step`]. Errors as [`Self::step`], and [`ViError::InvalidParameter`] when
    /// `lambda` does not have `2n` finite entries.
    pub fn linearize_second_order_contracted<'w>(&self, so: &'w mut SecondOrderWorkspace, at: StepInput<'_>, lambda: &[f64]) -> Result<&'w FlowDerivatives> {
        self.check_co_state(lambda)?;
        self.second_order_prepare(so, at)?;
        self.contract_prepared_second_order(so, lambda)
    }

    fn check_co_state(&self, lambda: &[f64]) -> Result<()> {
        Ok(vidyn_rbd::check_vector(lambda, "lam", 2 * self.n(), "2n")?)
    }

    /// The λ-independent part of [`Self::linearize_second_order_contracted`], for DDP's
    /// sequential backward pass: solves the step from `(q, p, u)` and keeps in `so` everything
    /// the contraction needs (the DEL Jacobian's LU, the control-point sensitivities, the
    /// momentum blocks; about two thirds of the cost), and returns `A`, `B` and the next
    /// state. Prepare the steps in parallel (one workspace per step), then call
    /// [`Self::contract_prepared_second_order`] with each step's co-state as it becomes known.
    pub fn prepare_second_order<'w>(&self, so: &'w mut SecondOrderWorkspace, at: StepInput<'_>) -> Result<&'w FlowDerivatives> {
        self.second_order_prepare(so, at)?;
        Ok(&so.out)
    }

    /// `hxx`, `hxu`, `huu` of [`Self::linearize_second_order_contracted`] for the co-state
    /// `lambda` `(2n,)` at the step last prepared in `so` (by [`Self::prepare_second_order`]
    /// or any second-order call), without solving it again: one transposed solve, `s + 1`
    /// dual Hessian evaluations and the O(s² n³) products. May be called repeatedly with
    /// different co-states. Errors with [`ViError::InvalidParameter`] if `so` holds no
    /// prepared step (none yet, or the last preparation failed) or `lambda` is not `2n` finite
    /// numbers.
    pub fn contract_prepared_second_order<'w>(&self, so: &'w mut SecondOrderWorkspace, lambda: &[f64]) -> Result<&'w FlowDerivatives> {
        self.check_co_state(lambda)?;
        if !so.prepared {
            return Err(ViError::InvalidParameter("no prepared step in this SecondOrderWorkspace: call prepare_second_order first".into()));
        }
        let n = self.n();
        self.second_order_contract(so, lambda)?;
        // the exact H is symmetric; its two computed halves differ by rounding (bounded in
        // `second_order::tests::raw_contraction_is_symmetric_to_rounding`): return their mean
        let (h, out, m) = (&so.hmat, &mut so.out, 2 * n);
        for j in 0..m {
            for i in 0..m {
                out.hxx[(i, j)] = 0.5 * (h[(i, j)] + h[(j, i)]);
            }
            for k in 0..n {
                out.hxu[(j, k)] = 0.5 * (h[(j, m + k)] + h[(m + k, j)]);
            }
        }
        for k in 0..n {
            for j in 0..n {
                out.huu[(j, k)] = 0.5 * (h[(m + j, m + k)] + h[(m + k, m + j)]);
            }
        }
        Ok(&so.out)
    }

    /// Exact first- and full second-order derivatives of the step from `(q, p, u)`: `A`, `B`
    /// and the tensors `fxx` `(2n, 2n, 2n)`, `fxu` `(2n, 2n, n)`, `fuu` `(2n, n, n)` in C order
    /// `[output, input, input]` (see [`FlowDerivatives`]; symmetric in the two state inputs).
    /// The contraction of [`Self::linearize_second_order_contracted`] for each of the `2n`
    /// outputs (`λ = e_i`), sharing the solve, the factorisation and `Q_y`: O(s² n⁴) per step.
    /// The first call on a workspace allocates the tensors (18 n³ numbers).
    pub fn linearize_second_order<'w>(&self, so: &'w mut SecondOrderWorkspace, at: StepInput<'_>) -> Result<&'w FlowDerivatives> {
        let n = self.n();
        let m = 2 * n;
        if so.out.fxx.len() != m * m * m {
            so.out.fxx = vec![0.0; m * m * m];
            so.out.fxu = vec![0.0; m * m * n];
            so.out.fuu = vec![0.0; m * n * n];
        }
        self.second_order_prepare(so, at)?;
        for i in 0..m {
            let mut unit = std::mem::take(&mut so.unit);
            unit.fill(0.0);
            unit[i] = 1.0;
            let done = self.second_order_contract(so, &unit);
            so.unit = unit;
            done?;
            let (h, out) = (&so.hmat, &mut so.out);
            // symmetric mean of the two computed halves, as in the contracted form
            for j in 0..m {
                for k in 0..m {
                    out.fxx[(i * m + j) * m + k] = 0.5 * (h[(j, k)] + h[(k, j)]);
                }
                for k in 0..n {
                    out.fxu[(i * m + j) * n + k] = 0.5 * (h[(j, m + k)] + h[(m + k, j)]);
                }
            }
            for j in 0..n {
                for k in 0..n {
                    out.fuu[(i * n + j) * n + k] = 0.5 * (h[(m + j, m + k)] + h[(m + k, m + j)]);
                }
            }
        }
        Ok(&so.out)
    }
}

/// Second-order linearisation of every step of a trajectory (see
/// [`linearize_trajectory_second_order`] and [`linearize_trajectory_contracted`]). Per step
/// `k`: `a[k]` (2n, 2n), `b[k]` (2n, n), and either the full tensors `fxx[k]`, `fxu[k]`,
/// `fuu[k]` (C order, layouts of [`FlowDerivatives`]) or the contracted `hxx[k]`, `hxu[k]`,
/// `huu[k]`; the other three are empty.
#[derive(Clone, Debug, Default)]
pub struct SecondOrderLinearization {
    pub a: Vec<DMatrix<f64>>,
    pub b: Vec<DMatrix<f64>>,
    pub fxx: Vec<Vec<f64>>,
    pub fxu: Vec<Vec<f64>>,
    pub fuu: Vec<Vec<f64>>,
    pub hxx: Vec<DMatrix<f64>>,
    pub hxu: Vec<DMatrix<f64>>,
    pub huu: Vec<DMatrix<f64>>,
    /// Largest deviation between the stored next state and the re-solved step.
    pub max_defect: f64,
}

fn defect(out: &FlowDerivatives, traj: &Trajectory, k: usize) -> f64 {
    out.q_next.iter().zip(traj.q_at(k + 1)).chain(out.p_next.iter().zip(traj.p_at(k + 1))).fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()))
}

/// Full second-order derivatives of every step of `traj`, independently and in parallel
/// (rayon, one [`SecondOrderWorkspace`] per worker; results do not depend on the number of
/// threads). Each step is re-solved from `(q_k, p_k, u_k)`, warm-started at the stored
/// `q_{k+1}`. Memory: 18 n³ numbers per step.
pub fn linearize_trajectory_second_order(vi: &VariationalIntegrator, traj: &Trajectory) -> Result<SecondOrderLinearization> {
    type Full = (DMatrix<f64>, DMatrix<f64>, Vec<f64>, Vec<f64>, Vec<f64>, f64);
    let results: Vec<Result<Full>> = (0..traj.steps)
        .into_par_iter()
        .map_init(
            || vi.second_order_workspace(),
            |so, k| {
                let out = vi.linearize_second_order(so, traj.step_input(k))?;
                Ok((out.a.clone(), out.b.clone(), out.fxx.clone(), out.fxu.clone(), out.fuu.clone(), defect(out, traj, k)))
            },
        )
        .collect();
    let mut lin = SecondOrderLinearization::default();
    for r in results {
        let (a, b, fxx, fxu, fuu, d) = r?;
        lin.a.push(a);
        lin.b.push(b);
        lin.fxx.push(fxx);
        lin.fxu.push(fxu);
        lin.fuu.push(fuu);
        lin.max_defect = lin.max_defect.max(d);
    }
    Ok(lin)
}

/// Second-order derivatives of every step of `traj` contracted with a co-state per step:
/// `lambda` is row-major `(N, 2n)`, row `k` the co-state of `x_{k+1}` (for DDP, the value
/// gradient `V'_x` at step `k + 1`). Parallel over steps like
/// [`linearize_trajectory_second_order`].
pub fn linearize_trajectory_contracted(vi: &VariationalIntegrator, traj: &Trajectory, lambda: &[f64]) -> Result<SecondOrderLinearization> {
    let m = 2 * vi.n();
    if lambda.len() != traj.steps * m {
        return Err(ViError::InvalidParameter(format!("lam has {} entries, expected steps·2n = {}", lambda.len(), traj.steps * m)));
    }
    type Contracted = (DMatrix<f64>, DMatrix<f64>, DMatrix<f64>, DMatrix<f64>, DMatrix<f64>, f64);
    let results: Vec<Result<Contracted>> = (0..traj.steps)
        .into_par_iter()
        .map_init(
            || vi.second_order_workspace(),
            |so, k| {
                let out = vi.linearize_second_order_contracted(so, traj.step_input(k), &lambda[k * m..(k + 1) * m])?;
                Ok((out.a.clone(), out.b.clone(), out.hxx.clone(), out.hxu.clone(), out.huu.clone(), defect(out, traj, k)))
            },
        )
        .collect();
    let mut lin = SecondOrderLinearization::default();
    for r in results {
        let (a, b, hxx, hxu, huu, d) = r?;
        lin.a.push(a);
        lin.b.push(b);
        lin.hxx.push(hxx);
        lin.hxu.push(hxu);
        lin.huu.push(huu);
        lin.max_defect = lin.max_defect.max(d);
    }
    Ok(lin)
}

#[cfg(test)]
mod tests;
