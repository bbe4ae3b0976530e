//! The exact Newton direction `δz = −J⁻¹ r` of the DEL equations in O(s³ n), without forming
//! or factoring the `sn × sn` Jacobian (Fan, Schultz & Murphey 2018, Proposition 2,
//! Algorithms B.1/B.2, with the forward pass rebuilt from eqs. D.16, D.17 and D.26 as in the
//! digest §4), and an O(s² n) DEL Jacobian–vector product used by the O(n²) linearisation.
//!
//! # Conventions
//!
//! Spatial vectors are `[linear; angular]` and world-frame (moments about the world origin).
//! The paper orders them `[angular; linear]`; its `ad_v x` is our `v ×ₘ x`
//! ([`Motion::cross_motion`]) and its `ad^D_F v = ad_vᵀ F` is our `−(v ×* F)`. So the
//! paper's `u_j = ad^D(μ_j) S̄_j` is `−ū_j` with `ū_j = S̄_j ×* μ_j`, and its
//! `e_j = ad^D(Γ_j) S̄_j` is `−ē_j` with `ē_j = S̄_j ×* Γ_j`; the update rules below carry
//! `+ū`, `+ē` where the paper prints `−u`, `−e`. Every other symbol keeps its meaning.
//! Indices: `α, ρ ∈ 0..s` (control points), `ϱ ∈ 0..s−1` (residual rows), `γ, ν ∈ 1..s`
//! (unknown points); `δq^0 ≡ 0` and `η^0 ≡ 0` because `q^0 = q_k` is fixed.
//!
//! # Gravity: a body wrench with its group derivative
//!
//! The residual ([`crate::del`]) carries gravity as the potential `V = −Σ_j m_j gᵀc_j`.
//! Here it is the equivalent body wrench (paper §2, Assumption 1)
//! `F̄_j^α = w_α Δt m_j [g; c_j × g]` (`[force; moment]`), so that the subtree impulse
//! `Γ_i^α = Σ_{j ⪰ i} F̄_j^α = w_α Δt [σm_i g; σp_i × g]` gives `S̄_i·Γ_i^α = −w_α Δt ∂V/∂q_i`
//! exactly: the residual is unchanged and the potential is not counted twice. This choice
//! makes B.1 exact because `V = Σ_j V_j(g_j)` is a sum of per-body terms, each depending on
//! its own body's pose only (Assumption 1), so its whole Hessian is carried by the per-body
//! 6×6 derivative below — while `V_qq` itself couples every pair of joints on a root path
//! and has no place in a per-body recursion. Under a world-frame pose perturbation
//! `η = [v; ω]` (`δg g⁻¹`, Def. C.1) the CoM moves by `ω × c + v`, and
//! `P_j η := δF̄_j − η ×* F̄_j = w_α Δt m_j [g × ω; c_j × (g × ω)]`, i.e.
//! `P_j = w_α Δt m_j [[0, g×], [0, c_j× g×]]`. This is the paper's
//! `∂_gF̄ + ad^D(F̄)` (its worked example `w Δt m [[ĝ p̂, −ĝ], [0, 0]]` plus `ad^D(F̄)`,
//! translated); `∂_vF̄ = 0`. Joint forces `Q^ϱ = w_ϱ Δt (u − d q̇^ϱ − κ (q^ϱ − rest))` have
//! `∂_qQ = −w_ϱ Δt κ` and `∂_q̇Q = −w_ϱ Δt d` (Assumption 1 holds).
//!
//! # Body wrenches
//!
//! Constant wrenches `F_j` given in the body frames ([`crate::point`]) are the textbook case of
//! Assumption 1: `F̄_j^α = w_α Δt ⁰X*_j(q^α) F_j` depends on body `j`'s pose only, and it is
//! carried along by that pose, `δF̄_j = η_j ×* F̄_j`, so their `P_j = ∂_gF̄ + ad^D(F̄)` is
//! **zero** and `∂_vF̄ = 0`. They enter B.1/B.2 only through the impulse `Γ` (added to the
//! gravity impulse in `prepare`, hence through `ē = S̄ ×* Γ` in the child transport
//! `δ̄Γ_λ += δ̄Γ_c + ē_c δq_c`); the per-body `P η` of the Jacobian–vector product and the
//! `Ψ` initialisation stay gravity-only. Unrolled, the transport gives
//! `S̄_i·δ̄Γ_i ∋ Σ_{k ≻ i} S̄_i·(S̄_k ×* σF_k) δq_k`, the `W_q` of [`crate::hessians`].
//!
//! # Variations (paper App. C/D, our convention)
//!
//! `η_i^α = η_λ^α + S̄_i^α δq_i^α` (D.16) and the spatial variation of the twist
//! `δ̄v_i^α = δv̄_i^α − η_i^α ×ₘ v̄_i^α = δ̄v_λ^α + ψ_i^α δq_i^α + S̄_i^α δq̇_i^α` (D.17, C.19
//! corrected), with `ψ_i = Ṡ̄_i = v̄_i ×ₘ S̄_i` and `δq̇^α = (1/Δt) Σ_γ b^{αγ} δq^γ`. For a force
//! `F` carried by body `i`, `δ(S̄_i·F) = S̄_i·δ̄F` with `δ̄F = δF − η_i ×* F`, and
//! `δ(ψ_i·μ_i) = ū_i·δ̄v_i + ψ_i·δ̄μ_i`. The subtree momentum and impulse vary as
//! `δ̄μ_i^α = M̄_i^α δ̄v_i^α + Σ_{c ∈ chd(i)} (δ̄μ_c^α + ū_c^α δq_c^α)` and
//! `δ̄Γ_i^α = P_i^α η_i^α + Σ_c (δ̄Γ_c^α + ē_c^α δq_c^α)`, so the linearised residual row is
//! `δr_i^ϱ = w_ϱΔt (ū_i^ϱ·δ̄v_i^ϱ + ψ_i^ϱ·δ̄μ_i^ϱ) + S̄_i^ϱ·δ̄Γ_i^ϱ
//!          + Σ_β a^{ϱβ} S̄_i^β·δ̄μ_i^β − w_ϱ (Δt κ_i δq_i^ϱ + d_i Σ_γ b^{ϱγ} δq_i^γ)`
//! with `a^{ϱβ} = w_β b^{βϱ}` ([`NewtonFactorization::del_jvp_lanes`] evaluates exactly this).
//!
//! # Algorithm B.1/B.2 (backward elimination, leaves to root)
//!
//! Once the subtree of `i` is eliminated, `δ̄μ_i^α = Σ_ρ D^{αρ} δ̄v_i^ρ + Σ_ν G^{αν} η_i^ν + l^α`,
//! `δ̄Γ_i^ϱ = Σ_ρ Π^{ϱρ} δ̄v_i^ρ + Σ_ν Ψ^{ϱν} η_i^ν + ζ^ϱ` and
//! `δq_i^γ = Σ_ρ X^{γρ}·δ̄v_λ^ρ + Σ_ν Y^{γν}·η_λ^ν + y^γ`. Per body (all `_i`):
//! * init `D^{αρ} = δ_{αρ} M̄^α`, `G = 0`, `Π = 0`, `Ψ^{ϱν} = δ_{ϱν} P^ϱ`, `l = ζ = 0`; then
//!   each child `c` adds (B.1a–c, B.3a–c)
//!   `D^{αρ} += D_c^{αρ} + Σ_γ H_c^{αγ} X_c^{γρ} + [α≥1] ū_c^α X_c^{αρ}`,
//!   `G^{αν} += G_c^{αν} + Σ_γ H_c^{αγ} Y_c^{γν} + [α≥1] ū_c^α Y_c^{αν}`,
//!   `l^α += l_c^α + Σ_γ H_c^{αγ} y_c^γ + [α≥1] ū_c^α y_c^α`, and the same for `Π, Ψ, ζ`
//!   with `Φ_c`, `ē_c` in place of `H_c`, `ū_c`;
//! * `H^{αγ} = D^{αγ} ψ^γ + G^{αγ} S̄^γ + (1/Δt) Σ_ρ b^{ργ} D^{αρ} S̄^ρ` (B.2 line 3, D.18
//!   corrected) and `Φ^{ϱγ}` the same with `Π, Ψ`;
//! * the rows `Θ̄^{ϱρ} = w_ϱΔt (δ_{ϱρ} ū^ϱ + D^{ϱρ}ᵀ ψ^ϱ) + Π^{ϱρ}ᵀ S̄^ϱ + Σ_β a^{ϱβ} D^{βρ}ᵀ S̄^β`,
//!   `Ξ̄^{ϱν} = w_ϱΔt G^{ϱν}ᵀ ψ^ϱ + Ψ^{ϱν}ᵀ S̄^ϱ + Σ_β a^{ϱβ} G^{βν}ᵀ S̄^β` and
//!   `ξ̄^ϱ = w_ϱΔt ψ^ϱ·l^ϱ + S̄^ϱ·ζ^ϱ + Σ_β a^{ϱβ} S̄^β·l^β`, so that
//!   `δr_i^ϱ = Σ_ρ Θ̄^{ϱρ}·δ̄v_i^ρ + Σ_ν Ξ̄^{ϱν}·η_i^ν + ξ̄^ϱ + δQ_i^ϱ`;
//! * substituting `δ̄v_i`, `η_i` gives the s×s matrix
//!   `Λ^{ϱγ} = Θ̄^{ϱγ}·ψ^γ + Ξ̄^{ϱγ}·S̄^γ + (1/Δt) Σ_ρ b^{ργ} Θ̄^{ϱρ}·S̄^ρ − w_ϱ(Δt κ δ_{ϱγ} + d b^{ϱγ})`
//!   (algebraically the paper's B.2 Λ: its `w Δt S̄ᵀ ad^D(μ) Ṡ̄` term is our `w Δt ū·ψ`, and
//!   `ū·S̄ = 0`), and solving `δr_i = f_i` for `δq_i`:
//!   `X^{γρ} = −(Λ⁻¹ Θ̄)^{γρ}`, `Y^{γν} = −(Λ⁻¹ Ξ̄)^{γν}`, `y^γ = (Λ⁻¹ (f_i − ξ̄))^γ`
//!   (Newton: `f = −r`).
//!
//! Forward pass (root to leaves, `η_0 = δ̄v_0 = 0`; rebuilt, digest §4):
//! `δq_i^γ = Σ_ρ X^{γρ}·δ̄v_λ^ρ + Σ_ν Y^{γν}·η_λ^ν + y^γ`, then `η_i`, `δ̄v_i` by D.16–D.17.
//!
//! Implementation notes. The child terms `[α≥1] ū_c^α X_c^{αρ}` are folded into
//! `Ĥ_c^{αα} = H_c^{αα} + ū_c^α` once `X_c` is known (and `ē_c` into `Φ̂_c`), so every update
//! is `Σ_γ Ĥ X` (one outer product per `γ`). `Λ̄ = Λ⁻¹` is formed explicitly (s×s, from a
//! pivoted LU). A body's blocks are initialised by its first child instead of zero-filling
//! all of them.
//!
//! `D, G, Π, Ψ, H, Φ, Θ̄, Ξ̄, Λ⁻¹, X, Y` do not depend on the right-hand side: they are
//! computed once by [`NewtonFactorization::factorize`] (O(s³ n)), and
//! [`NewtonFactorization::solve`] applies `J⁻¹` to any right-hand side in O(s² n) (the
//! `l, ζ, ξ̄, y` sweep and the forward pass). The linearisation applies it to `3n` columns
//! (digest §6.5), O(s² n²) per step.
//!
//! # The momentum row (linearisation)
//!
//! `p_{k+1} = D_{s+1} L_d + Q^s` is row `ϱ = s` of the same formulas. When the impulse
//! recursion also carries that row (`Π^{sρ}, Ψ^{sν}, ζ^s`, and `Θ̄^{sρ}, Ξ̄^{sν}, ξ̄^s` per
//! body), the forward pass gives, for the solution `x` of `J x = f` (with `δq^0 = 0`),
//! `δp_i = Σ_ρ Θ̄_i^{sρ}·δ̄v_i^ρ + Σ_ν Ξ̄_i^{sν}·η_i^ν + ξ̄_i^s + δQ_i^s`, evaluated with body
//! `i`'s own `δ̄v_i, η_i` (the subtree of `i` is eliminated, its ancestors are known). So each
//! linearisation column costs one solve, plus one Jacobian–vector product for the columns of
//! `∂(R, P)/∂q_k`.
//!
//! # Mixed rows (the midpoint rule)
//!
//! When the DEL rows are combinations `Σ_α mix[x][α] (D_{α+1}L_d + Q^α)` of the control-point
//! rows ([`Scheme::mix`], upper triangular), everything above stays per control point except
//! the row coefficients: the impulse recursion carries all `s + 1` control-point rows, and the
//! per-body `Θ̄, Ξ̄` (and `ξ̄` in the sweeps, and the joint-force terms of `Λ`) are mixed before
//! `Λ` is formed. The unknowns stay the control points `q^1..q^s`.
//!
//! # Singularity
//!
//! The method needs every per-body `Λ_i` to be invertible; a numerically singular one (pivot
//! below `1e-14` times the largest `|Λ|` of the step, or non-finite) is reported, and the
//! caller turns it into [`crate::ViError::SingularJacobian`]. A massless leaf without damping
//! or spring has `Λ = 0`. No pivoting happens across bodies, yet in our measurements on
//! 100-link chains whose `J` had condition numbers 1e8–1e11, `|J δz + r|` stayed within a
//! factor ≈ 2 of the dense pivoted LU's (the two directions then differ by ≈ cond · ε).

mod dense;
mod lanes;
mod solve;

use dense::DenseFactors;
use lanes::Sweep;
pub(crate) use lanes::{add_l6, mul_l6, mul_transposed_l6, Lanes, LANES, ZERO_L6};

use crate::del::{JointForces, StepPoints};
use crate::dense::{small_lu, small_solve};
use crate::scheme::Scheme;
use nalgebra::{Matrix6, Vector6};
use vidyn_rbd::Model;
use vidyn_spatial::{skew, Force, Inertia, Motion};

type V6 = Vector6<f64>;
type M6 = Matrix6<f64>;

/// The right-hand-side-independent part of Algorithms B.1/B.2 for one step, plus the scratch
/// of the per-right-hand-side sweeps. All storage is allocated once by [`Self::new`].
///
/// Layouts (`P = s + 1` control points, bodies `i = 0..n` in topological order): per point
/// `[i·P + α]`; blocks `D [(i·P + α)·P + ρ]`, `G, H [(i·P + α)·s + γ−1]`,
/// `Π [(i·P + ϱ)·P + ρ]`, `Ψ, Φ [(i·P + ϱ)·s + γ−1]`, `X [(i·P + ρ)·s + γ−1]`,
/// `Y [(i·s + ν−1)·s + γ−1]`, `Λ, Λ̄ [i·s² + row·s + col]`. The impulse rows `ϱ` run over
/// `0..rows`: `rows = s` for a Newton direction, `rows = s + 1` when the momentum row
/// `p_{k+1}` is wanted too (linearisation).
#[derive(Clone, Debug)]
pub(crate) struct NewtonFactorization {
    n: usize,
    s: usize,
    rows: usize,
    // world-frame kinematics at each control point, `[i·P + α]`
    /// `S̄_i^α`.
    col: Vec<V6>,
    /// `ψ_i^α = Ṡ̄_i^α`.
    rate: Vec<V6>,
    /// `ū_i^α = S̄_i^α ×* μ_i^α`.
    ubar: Vec<V6>,
    /// `ē_i^α = S̄_i^α ×* Γ_i^α`.
    ebar: Vec<V6>,
    /// `M̄_i^α` (body `i` alone).
    inertia: Vec<Inertia>,
    // factorisation
    d: Vec<M6>,
    g: Vec<M6>,
    pi: Vec<M6>,
    psi: Vec<M6>,
    h: Vec<V6>,
    phi: Vec<V6>,
    x: Vec<V6>,
    y: Vec<V6>,
    /// `Θ̄^{sρ}`, `Ξ̄^{sν}` of every body (the momentum row), `[i·P + ρ]`, `[i·s + ν−1]`.
    theta_s: Vec<V6>,
    xi_s: Vec<V6>,
    /// `Σ_x Θ̄^{xρ}`, `Σ_x Ξ̄^{xν}` over every row `x = 0..s` of the prescribed bodies (with
    /// the momentum row), `[i·P + ρ]`, `[i·s + ν−1]`: their rows' sum for [`Self::solve_lanes`].
    theta_sum: Vec<V6>,
    xi_sum: Vec<V6>,
    lam: Vec<f64>,
    inv: Vec<f64>,
    piv: Vec<usize>,
    /// per body: `max |Λ_i|` and its smallest `|pivot|`.
    lam_max: Vec<f64>,
    lam_pivot: Vec<f64>,
    /// per body: a prescribed (kinematic) joint, whose coordinate is an input of the step.
    prescribed: Vec<bool>,
    /// per body: whether a child has written its blocks in the current factorisation.
    touched: Vec<bool>,
    // per-body temporaries of the factorisation
    /// `v_ρ^γ` of `H, Φ` and `u_β^ϱ` of `Θ̄, Ξ̄` for one `γ` / `ϱ`, `(s+1,)` each.
    h_dirs: Vec<V6>,
    theta_dirs: Vec<V6>,
    theta: Vec<V6>,
    xi: Vec<V6>,
    /// a column of `Λ⁻¹`, `(s,)`.
    small: Vec<f64>,
    /// Scratch of the one-right-hand-side sweeps ([`Self::solve`]).
    one: Sweep<1>,
    /// Scratch of the batched sweeps and the Jacobian–vector product (linearisation), and
    /// `M̄_i^α` as 6×6 matrices `[i·P + α]` for the latter; empty until [`Self::ensure_lanes`].
    lanes: Sweep<LANES>,
    lane_inertia: Vec<M6>,
    /// The dense form of every operation (module `dense`), for small steps; `None`: Algorithms
    /// B.1/B.2.
    dense: Option<Box<DenseFactors>>,
    /// Whether Newton iterations' factorisations (without the momentum row) and linearisations'
    /// (with it) are dense.
    dense_newton: bool,
    dense_linearization: bool,
    /// Whether the last factorisation was the dense one (every operation follows it).
    dense_now: bool,
}

#[inline]
fn motion(m: &Motion) -> V6 {
    m.to_vector()
}

impl NewtonFactorization {
    pub(crate) fn new(n: usize, s: usize) -> Self {
        let p = s + 1;
        let z6 = V6::zeros();
        let zm = M6::zeros();
        Self {
            n,
            s,
            rows: s,
            col: vec![z6; n * p],
            rate: vec![z6; n * p],
            ubar: vec![z6; n * p],
            ebar: vec![z6; n * p],
            inertia: vec![Inertia::zero(); n * p],
            d: vec![zm; n * p * p],
            g: vec![zm; n * p * s],
            pi: vec![zm; n * p * p],
            psi: vec![zm; n * p * s],
            h: vec![z6; n * p * s],
            phi: vec![z6; n * p * s],
            x: vec![z6; n * s * p],
            y: vec![z6; n * s * s],
            theta_s: vec![z6; n * p],
            xi_s: vec![z6; n * s],
            theta_sum: vec![z6; n * p],
            xi_sum: vec![z6; n * s],
            lam: vec![0.0; n * s * s],
            inv: vec![0.0; n * s * s],
            piv: vec![0; n * s],
            lam_max: vec![0.0; n],
            lam_pivot: vec![0.0; n],
            prescribed: vec![false; n],
            touched: vec![false; n],
            h_dirs: vec![z6; p],
            theta_dirs: vec![z6; p],
            theta: vec![z6; p * p],
            xi: vec![z6; p * s],
            small: vec![0.0; s],
            one: Sweep::new(n, s),
            lanes: Sweep::default(),
            lane_inertia: Vec::new(),
            dense: None,
            dense_newton: false,
            dense_linearization: false,
            dense_now: false,
        }
    }

    /// The same factorisation in dense form (module `dense`): `J` formed from the energy
    /// Hessians and factored by LU, every solve and Jacobian–vector product a dense product —
    /// for the Newton iterations (factorisations without the momentum row) with `newton`, for
    /// the linearisations (with it) with `linearization`.
    pub(crate) fn dense(mut self, newton: bool, linearization: bool) -> Self {
        let mut dense = DenseFactors::new(self.n, self.s);
        dense.set_prescribed(&self.prescribed);
        self.dense = Some(Box::new(dense));
        (self.dense_newton, self.dense_linearization) = (newton, linearization);
        self
    }

    /// Marks the prescribed (kinematic) joints: their DEL rows are dropped and their control
    /// points are inputs, so every solve returns `δq_i = 0` for them.
    pub(crate) fn set_prescribed(&mut self, prescribed: &[bool]) {
        self.prescribed.copy_from_slice(prescribed);
        if let Some(dense) = &mut self.dense {
            dense.set_prescribed(prescribed);
        }
    }

    /// Copies the per-point kinematics of `pts` (set at the current iterate) into 6-vector
    /// form and evaluates `ū`, `Γ` and `ē`. O(s n).
    fn prepare(&mut self, model: &Model, sc: &Scheme, dt: f64, pts: &StepPoints) {
        let (n, p) = (self.n, sc.points());
        let grav = model.gravity.linear;
        for a in 0..p {
            let st = &pts.states[a];
            let wdt = sc.weights[a] * dt;
            for i in 0..n {
                let k = i * p + a;
                let col = &st.columns[i];
                self.col[k] = motion(col);
                self.rate[k] = motion(&st.column_rates[i]);
                self.ubar[k] = col.cross_force(&st.momenta[i]).to_vector();
                // Γ_i^α = w_α Δt ([σm_i g; σp_i × g] + σF_i) (gravity and the body wrenches)
                let mut gamma = Force::new(grav * (wdt * st.sigma_m[i]), st.sigma_p[i].cross(&grav) * wdt);
                if st.wrenched {
                    gamma += st.sigma_wrench[i] * wdt;
                }
                self.ebar[k] = col.cross_force(&gamma).to_vector();
                self.inertia[k] = st.body_inertias[i];
            }
        }
    }

    /// The factorisation sweep of Algorithms B.1/B.2 (module docs): everything that does not
    /// depend on the right-hand side, O(s³ n). `pts` must be set at the current iterate
    /// ([`StepPoints::set`]). With `momentum_row`, the impulse recursion also carries the row
    /// `ϱ = s` (`Π^{sρ}, Ψ^{sν}`) and stores `Θ̄^{sρ}, Ξ̄^{sν}`, so that [`Self::solve`] can
    /// return the variation of `p_{k+1}` as well. Returns `false` when some `Λ_i` is
    /// numerically singular.
    pub(crate) fn factorize(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, pts: &StepPoints, momentum_row: bool) -> bool {
        self.dense_now = self.dense.is_some() && if momentum_row { self.dense_linearization } else { self.dense_newton };
        if let Some(dense) = self.dense.as_mut().filter(|_| self.dense_now) {
            return dense.factorize(model, sc, dt, forces, pts, momentum_row);
        }
        self.prepare(model, sc, dt, pts);
        match self.s {
            1 => self.factorize_sized::<1>(model, sc, dt, forces, momentum_row),
            _ => self.factorize_sized::<0>(model, sc, dt, forces, momentum_row),
        }
    }

    /// [`Self::factorize`] after `prepare`, for `s = S` known at compile time (`S = 0`: any
    /// `s`, read at run time). One body of code; the `S = 1` instance (midpoint, trapezoid)
    /// lets the compiler unroll the per-point loops and drop their bounds checks.
    fn factorize_sized<const S: usize>(&mut self, model: &Model, sc: &Scheme, dt: f64, forces: &JointForces, momentum_row: bool) -> bool {
        let (n, s) = (self.n, sized::<S>(self.s));
        let p = s + 1;
        // a mixing scheme (midpoint) needs every control-point row, momentum or not
        let mixing = sc.mixes_rows();
        let rows = if momentum_row || mixing { p } else { s };
        self.rows = rows;
        let w = &sc.weights;
        let inv_dt = 1.0 / dt;
        let grav = model.gravity.linear;
        let gx = skew(&grav);
        let a_coef = |rho: usize, beta: usize| w[beta] * sc.b(beta, rho);
        // a body's blocks are written by its first child (`touched`), else zeroed here
        self.touched.fill(false);
        for i in (0..n).rev() {
            let kp = i * p;
            if !self.touched[i] {
                self.d[kp * p..(kp + p) * p].fill(M6::zeros());
                self.g[kp * s..(kp + p) * s].fill(M6::zeros());
                self.pi[kp * p..(kp + rows) * p].fill(M6::zeros());
                self.psi[kp * s..(kp + rows) * s].fill(M6::zeros());
            }
            // own inertia and gravity derivative P (children have been added already)
            for a in 0..p {
                self.d[(kp + a) * p + a] += self.inertia[kp + a].to_matrix();
            }
            for r in 1..rows {
                // P = w Δt m [[0, g×], [0, c× g×]]
                let body = &self.inertia[kp + r];
                let scale = w[r] * dt * body.mass;
                let blk = &mut self.psi[(kp + r) * s + r - 1];
                let top = blk.fixed_view::<3, 3>(0, 3) + gx * scale;
                let bottom = blk.fixed_view::<3, 3>(3, 3) + skew(&body.com) * gx * scale;
                blk.fixed_view_mut::<3, 3>(0, 3).copy_from(&top);
                blk.fixed_view_mut::<3, 3>(3, 3).copy_from(&bottom);
            }
            // H^{αγ} = Σ_ρ D^{αρ} v_ρ^γ + G^{αγ} S̄^γ and Φ^{ϱγ} = Σ_ρ Π^{ϱρ} v_ρ^γ + Ψ^{ϱγ} S̄^γ
            // (B.2 line 3), with the directions v_ρ^γ = (b^{ργ}/Δt) S̄^ρ + δ_{ργ} ψ^γ
            for gm in 1..=s {
                for r in 0..p {
                    let mut v = self.col[kp + r] * (sc.b(r, gm) * inv_dt);
                    if r == gm {
                        v += self.rate[kp + gm];
                    }
                    self.h_dirs[r] = v;
                }
                let cg = self.col[kp + gm];
                for a in 0..p {
                    let mut hv = self.g[(kp + a) * s + gm - 1] * cg;
                    for r in 0..p {
                        hv += self.d[(kp + a) * p + r] * self.h_dirs[r];
                    }
                    self.h[(kp + a) * s + gm - 1] = hv;
                }
                for r in 0..rows {
                    let mut fv = self.psi[(kp + r) * s + gm - 1] * cg;
                    for c in 0..p {
                        fv += self.pi[(kp + r) * p + c] * self.h_dirs[c];
                    }
                    self.phi[(kp + r) * s + gm - 1] = fv;
                }
            }
            // Θ̄^{ϱρ} = Σ_β D^{βρ}ᵀ u_β^ϱ + Π^{ϱρ}ᵀ S̄^ϱ + δ_{ϱρ} w_ϱΔt ū^ϱ and
            // Ξ̄^{ϱν} = Σ_β G^{βν}ᵀ u_β^ϱ + Ψ^{ϱν}ᵀ S̄^ϱ, with u_β^ϱ = a^{ϱβ} S̄^β + δ_{βϱ} w_ϱΔt ψ^ϱ
            for r in 0..rows {
                let wdt = w[r] * dt;
                for beta in 0..p {
                    let mut u = self.col[kp + beta] * a_coef(r, beta);
                    if beta == r {
                        u += self.rate[kp + r] * wdt;
                    }
                    self.theta_dirs[beta] = u;
                }
                let cr = self.col[kp + r];
                for c in 0..p {
                    let mut t = self.pi[(kp + r) * p + c].tr_mul(&cr);
                    if c == r {
                        t += self.ubar[kp + r] * wdt;
                    }
                    for beta in 0..p {
                        t += self.d[(kp + beta) * p + c].tr_mul(&self.theta_dirs[beta]);
                    }
                    self.theta[r * p + c] = t;
                }
                for nu in 0..s {
                    let mut t = self.psi[(kp + r) * s + nu].tr_mul(&cr);
                    for beta in 0..p {
                        t += self.g[(kp + beta) * s + nu].tr_mul(&self.theta_dirs[beta]);
                    }
                    self.xi[r * s + nu] = t;
                }
            }
            if mixing {
                self.mix_rows(sc);
            }
            if momentum_row {
                self.theta_s[kp..kp + p].copy_from_slice(&self.theta[s * p..(s + 1) * p]);
                self.xi_s[i * s..(i + 1) * s].copy_from_slice(&self.xi[s * s..(s + 1) * s]);
                if self.prescribed[i] {
                    for c in 0..p {
                        self.theta_sum[kp + c] = (0..p).map(|x| self.theta[x * p + c]).sum();
                    }
                    for nu in 0..s {
                        self.xi_sum[i * s + nu] = (0..p).map(|x| self.xi[x * s + nu]).sum();
                    }
                }
            }
            if self.prescribed[i] {
                // a prescribed (kinematic) joint: its rows are dropped and its δq is zero, so it
                // hands its subtree to the parent as if it were welded (X = Y = 0, Λ̄ = 0)
                self.lam_max[i] = 0.0;
                self.lam_pivot[i] = f64::INFINITY;
                self.inv[i * s * s..(i + 1) * s * s].fill(0.0);
                self.x[i * p * s..(i + 1) * p * s].fill(V6::zeros());
                self.y[i * s * s..(i + 1) * s * s].fill(V6::zeros());
            } else {
                // Λ (s×s), its LU factors, Λ̄ = Λ⁻¹
                let lam = &mut self.lam[i * s * s..(i + 1) * s * s];
                let mut lmax = 0.0_f64;
                for r in 0..s {
                    for gm in 1..=s {
                        let mut v = self.theta[r * p + gm].dot(&self.rate[kp + gm]) + self.xi[r * s + gm - 1].dot(&self.col[kp + gm]);
                        for c in 0..p {
                            v += sc.b(c, gm) * inv_dt * self.theta[r * p + c].dot(&self.col[kp + c]);
                        }
                        v -= joint_force_derivative(sc, dt, forces, i, r, gm);
                        lam[r * s + gm - 1] = v;
                        lmax = lmax.max(v.abs());
                    }
                }
                let piv = &mut self.piv[i * s..(i + 1) * s];
                let min_pivot = small_lu(lam, s, piv);
                self.lam_max[i] = if lmax.is_finite() { lmax } else { f64::INFINITY };
                self.lam_pivot[i] = min_pivot;
                if !(min_pivot > 0.0 && min_pivot.is_finite()) {
                    return false;
                }
                let inv = &mut self.inv[i * s * s..(i + 1) * s * s];
                for c in 0..s {
                    self.small.fill(0.0);
                    self.small[c] = 1.0;
                    small_solve(lam, s, piv, &mut self.small);
                    for r in 0..s {
                        inv[r * s + c] = self.small[r];
                    }
                }
                // X = −Λ̄ Θ̄, Y = −Λ̄ Ξ̄ (rows ϱ < s only)
                for gm in 0..s {
                    for c in 0..p {
                        let mut t = V6::zeros();
                        for r in 0..s {
                            t -= self.theta[r * p + c] * inv[gm * s + r];
                        }
                        self.x[(i * p + c) * s + gm] = t;
                    }
                    for nu in 0..s {
                        let mut t = V6::zeros();
                        for r in 0..s {
                            t -= self.xi[r * s + nu] * inv[gm * s + r];
                        }
                        self.y[(i * s + nu) * s + gm] = t;
                    }
                }
            }
            // Ĥ^{αα} = H^{αα} + ū^α, Φ̂^{ϱϱ} = Φ^{ϱϱ} + ē^ϱ (α, ϱ ≥ 1): the child terms of B.1/B.3
            for gm in 1..=s {
                self.h[(kp + gm) * s + gm - 1] += self.ubar[kp + gm];
                if gm < rows {
                    self.phi[(kp + gm) * s + gm - 1] += self.ebar[kp + gm];
                }
            }
            // hand the eliminated subtree to the parent (B.1a–b, B.3a–b)
            if let Some(par) = model.parents[i] {
                self.accumulate_into_parent::<S>(i, par);
            }
        }
        let scale = self.lam_max.iter().fold(0.0_f64, |m, &x| m.max(x));
        scale.is_finite() && self.lam_pivot.iter().all(|&pv| pv > 1e-14 * scale)
    }

    /// Replaces the control-point rows `Θ̄^{αρ}`, `Ξ̄^{αν}` of the current body by the rows of
    /// the step variables, `Σ_{α ≥ x} mix[x][α] (·)^α` ([`Scheme::mix`]), in place (ascending
    /// `x` only reads rows not yet replaced). Only the midpoint rule needs it.
    fn mix_rows(&mut self, sc: &Scheme) {
        let (s, p) = (self.s, self.s + 1);
        for x in 0..p {
            for c in 0..p {
                self.theta[x * p + c] = (x..p).map(|a| self.theta[a * p + c] * sc.mix(x, a)).sum();
            }
            for nu in 0..s {
                self.xi[x * s + nu] = (x..p).map(|a| self.xi[a * s + nu] * sc.mix(x, a)).sum();
            }
        }
    }

    /// `D_λ^{αρ} += D_i^{αρ} + Σ_γ Ĥ_i^{αγ} X_i^{γρ}` and the same for `G` (with `Y`), `Π`,
    /// `Ψ` (with `Φ̂`): B.1a–b, B.3a–b, where `Ĥ^{αγ} = H^{αγ} + δ_{αγ} ū^α` and
    /// `Φ̂^{ϱγ} = Φ^{ϱγ} + δ_{ϱγ} ē^ϱ` carry the `[α≥1] ū X` and `[ϱ≥1] ē X` terms. O(s³) 6×6 work.
    fn accumulate_into_parent<const S: usize>(&mut self, i: usize, par: usize) {
        let (s, rows) = (sized::<S>(self.s), self.rows);
        let p = s + 1;
        let first = !self.touched[par];
        self.touched[par] = true;
        let x = &self.x[i * p * s..(i + 1) * p * s];
        let y = &self.y[i * s * s..(i + 1) * s * s];
        let (dp, di) = split(&mut self.d, i, par, p * p);
        for a in 0..p {
            let h = &self.h[(i * p + a) * s..(i * p + a + 1) * s];
            for r in 0..p {
                add_block::<S>(&mut dp[a * p + r], &di[a * p + r], h, &x[r * s..(r + 1) * s], first);
            }
        }
        let (gp, gi) = split(&mut self.g, i, par, p * s);
        for a in 0..p {
            let h = &self.h[(i * p + a) * s..(i * p + a + 1) * s];
            for nu in 0..s {
                add_block::<S>(&mut gp[a * s + nu], &gi[a * s + nu], h, &y[nu * s..(nu + 1) * s], first);
            }
        }
        let (pip, pii) = split(&mut self.pi, i, par, p * p);
        for r in 0..rows {
            let phi = &self.phi[(i * p + r) * s..(i * p + r + 1) * s];
            for c in 0..p {
                add_block::<S>(&mut pip[r * p + c], &pii[r * p + c], phi, &x[c * s..(c + 1) * s], first);
            }
        }
        let (psp, psi) = split(&mut self.psi, i, par, p * s);
        for r in 0..rows {
            let phi = &self.phi[(i * p + r) * s..(i * p + r + 1) * s];
            for nu in 0..s {
                add_block::<S>(&mut psp[r * s + nu], &psi[r * s + nu], phi, &y[nu * s..(nu + 1) * s], first);
            }
        }
    }
}

/// `S` when it is a compile-time size, else the run-time `s` (`S = 0`).
#[inline(always)]
fn sized<const S: usize>(s: usize) -> usize {
    debug_assert!(S == 0 || S == s);
    if S == 0 {
        s
    } else {
        S
    }
}

/// `t = base + Σ_k h_k x_kᵀ` (`first`) or `t += base + Σ_k h_k x_kᵀ`, in one pass over the
/// 36 entries (column-major storage), `k < S` (`S = 0`: `k < h.len()`).
#[inline]
fn add_block<const S: usize>(t: &mut M6, base: &M6, h: &[V6], x: &[V6], first: bool) {
    let terms = sized::<S>(h.len());
    let (h, x) = (&h[..terms], &x[..terms]);
    let (t, base) = (t.as_mut_slice(), base.as_slice());
    for c in 0..6 {
        for r in 0..6 {
            let e = c * 6 + r;
            let mut v = if first { base[e] } else { t[e] + base[e] };
            for k in 0..terms {
                v += h[k][r] * x[k][c];
            }
            t[e] = v;
        }
    }
}

/// The blocks of the parent `par` (mutable) and of body `i > par` (shared) in `v`, `stride`
/// blocks per body.
fn split(v: &mut [M6], i: usize, par: usize, stride: usize) -> (&mut [M6], &[M6]) {
    let (lo, hi) = v.split_at_mut(i * stride);
    (&mut lo[par * stride..(par + 1) * stride], &hi[..stride])
}

/// `−∂(row x of Q_i)/∂q_i^γ = Σ_α mix[x][α] w_α (d_i b[α][γ] + Δt κ_i δ_{αγ})`: the joint
/// damping and spring part of the DEL Jacobian for joint `i` (`Q^α = w_α Δt (u − d q̇^α −
/// κ (q^α − rest))`, module docs).
#[inline]
fn joint_force_derivative(sc: &Scheme, dt: f64, forces: &JointForces, i: usize, x: usize, gamma: usize) -> f64 {
    (x..sc.points())
        .map(|a| {
            let spring = if a == gamma { dt * forces.stiffness[i] } else { 0.0 };
            sc.mix(x, a) * sc.weights[a] * (sc.b(a, gamma) * forces.damping[i] + spring)
        })
        .sum()
}

#[cfg(test)]
mod tests;
