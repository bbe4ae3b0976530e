//! Second-order partial derivatives of inverse dynamics: `∂²τ/∂q²`, `∂²τ/∂q̇²`, `∂²τ/∂q∂q̇`
//! and `∂M/∂q` (IDSVA-SO, Singh, Russell & Wensing 2023, Algorithm 1), and their contractions
//! with a co-vector `λ` (the `λᵀ∂²τ` that DDP needs) computed without forming the tensors.
//!
//! # Tensor layout (read once)
//! Every tensor is an `(nv, nv, nv)` [`Tensor3`], a contiguous `Vec<f64>` in NumPy C order:
//! entry `[i, j, k]` sits at `(i·nv + j)·nv + k`, and
//! $$T[i, j, k] = \frac{\partial}{\partial x_k}\Big(\frac{\partial \tau_i}{\partial y_j}\Big)$$
//! * `i` — torque (row); `j` — the **inner** (first) derivative variable (column);
//!   `k` — the **outer** (second) derivative variable (page). This is the paper's (16)–(17)
//!   layout and Pinocchio's `ComputeRNEASecondOrderDerivatives` layout (all four tensors
//!   agree entry by entry, to ~1e-15, with Pinocchio's C++ on every example-robot-data robot,
//!   fixed and free-flyer base: `tests/test_second_order_oracle.py`).
//! * `d2tau_dq2[i, j, k] = ∂/∂q_k (∂τ_i/∂q_j)`;
//! * `d2tau_dv2[i, j, k] = ∂/∂q̇_k (∂τ_i/∂q̇_j)` (symmetric in `j, k`);
//! * `d2tau_dqdv[i, j, k] = ∂/∂q̇_k (∂τ_i/∂q_j)`: **`j` indexes q, `k` indexes q̇**. Since
//!   q̇ is a joint-frame velocity held fixed when q moves, the two derivatives commute (33):
//!   this also equals `∂/∂q_j (∂τ_i/∂q̇_k)`;
//! * `dm_dq[i, j, k] = ∂M_ij/∂q_k` (symmetric in `i, j`; equals `∂²τ_i/∂q̈_j∂q_k`).
//!
//! Derivatives with respect to q are taken on the configuration manifold, as in
//! [`crate::rnea_derivatives`]: direction `k` is the right perturbation
//! `q ⊕ δ e_k`, i.e. `M_J(q) ← M_J(q)·exp(S_k δ)` for the joint owning dof `k`. The second
//! derivative `[·, j, k]` applies the outer perturbation first (next to `M_J(q)`):
//! `∂²/∂ε_j∂ε_k τ(M_J · exp(ε_k S_k) · exp(ε_j S_j))`, which is what differentiating the
//! first-order Jacobian `∂τ/∂q` (evaluated at `q ⊕ δ e_k`) along `δ` gives.
//!
//! **Same-joint blocks of `d2tau_dq2` are not symmetric** for joints whose motion
//! generators do not commute (spherical, free-flyer, planar): for dofs `a ≠ b` of one joint,
//! `H[:, a, b] − H[:, b, a] = Σ_c κ_c ∂τ/∂q_c` with `S_b ×ₘ S_a = Σ_c κ_c S_c` (the Lie bracket
//! of the two generators; Singh et al. §II, "Notation for FO/SO derivatives"). Blocks of two
//! different joints, all of `d2tau_dv2` (in `j, k`), and `dm_dq` (in `i, j`) are symmetric.
//! A second-order Taylor model along the retraction `q ⊕ δ` only sees the symmetric part
//! `½(H + Hᵀ)` in `(j, k)`, so optimisers may symmetrise.
//!
//! Structure: `[i, j, k]` is non-zero only if the joints of `i`, `j`, `k` lie on one path to
//! the root (branch-induced sparsity), and `∂M_ij/∂q_k = 0` when joint `k` is an ancestor of
//! (or equal to) both joints `i` and `j` (Appendix C, ∂M/∂q item 1).
//!
//! # Notation and translation of the paper
//! The paper writes spatial vectors `[angular; linear]`, we store `[linear; angular]`. Every
//! formula below is written with the coordinate-free operators `×ₘ` ([`Motion::cross_motion`],
//! matrix `cross_motion_matrix`), `×*` (`cross_force_matrix`), the cross-bar
//! `f ×̄*` with `(f ×̄*) m = m ×* f` ([`Force::cross_bar_matrix`]), inertias and power
//! pairings. A reordering of the coordinates of both motions and forces by the same
//! permutation conjugates all of them consistently, so the paper's formulas carry over
//! verbatim. All quantities are world-frame, as in [`crate::rnea_derivatives`] and in the
//! paper (its "ground frame"):
//!
//! | here (`rnea_derivatives`) | paper | meaning |
//! |---|---|---|
//! | `J_k` | `s_k` (column of `S_i`) | world-frame joint column |
//! | `ψ_k = V_λ ×ₘ J_k` | `ψ̇_k` (Ψ̇, eq. 15) | column rate due to the parent's motion |
//! | `α_k = A_λ ×ₘ J_k + V_λ ×ₘ ψ_k` | `ψ̈_k` (Ψ̈, eq. 15) | its second rate |
//! | `φ_k = V_i ×ₘ J_k` | `ṡ_k` | `J̇_k` |
//! | `B_i = (V_i×*)I_i − I_i(V_i×) + (I_iV_i)×̄*` | `2ℬ(I_i, v_i)` (14) | body "Coriolis" matrix, **without** the ½ |
//! | `I^C`, `B^C`, `F^C` | `I^C`, `B^C` (Alg. 1's, no ½), `f^C` | subtree sums |
//!
//! We write `𝔅(I, s) = (s×*)I − I(s×) + (Is)×̄*` (= `2ℬ(I, s)` of (19), i.e. Alg. 1's lines
//! 15–16 which drop the ½ as §IV-G says).
//!
//! # Full tensors: Algorithm 1 (IDSVA-SO), with the digest's errata applied
//! The expressions are the paper's Appendix-C tensor expressions (q–q 1–6, q̇–q̇ 1–8,
//! cross 1–6, ∂M/∂q 1–5; derived from (12)–(13) with the joint identities K1–K16), reduced to
//! per-dof products and renamed to the order `k ⪯ j ⪯ i` (§IV-F; the missing blocks follow
//! from (35), (37), (39)). With `I = I^C_i`, `B = B^C_i`, `F = F^C_i`, for each dof `p` of
//! joint `i` (columns `s_p, ψ_p, α_p, φ_p`):
//! * `Bs = 𝔅(I, s_p)`, `Bψ = 𝔅(I, ψ_p)`, `A0 = (I s_p)×̄*`, `A1 = (s_p×*)I − I(s_p×)`,
//!   `A2 = 2A0 − Bs`, `A3 = Bψ + (s_p×*)B − B(s_p×)`, `A4 = (Bᵀs_p)×̄*`,
//!   `A5 = (Bψ_p + Iα_p + s_p ×* F)×̄*`, `A6 = (s_p×*)I + A0`, `A7 = (Bs_p + I(ψ_p + φ_p))×̄*`
//!   (lines 15–24; line 18 means `I(s_p×)`, line 20 `B(s_p×)`, and line 22 uses the
//!   **composite** force `F^C_i`, not the body force — errata 2–3);
//! * for each ancestor-or-self joint `j ⪯ i`, dof `t` (`s_t, ψ_t, α_t, φ_t`):
//!   `u1 = A3ᵀs_t`, `u2 = A1ᵀs_t`, `u3 = A3ψ_t + A1α_t + A5s_t`, `u4 = A6s_t`,
//!   `u5 = A2ψ_t + A4s_t`, `u6 = Bsψ_t + A7s_t`, `u7 = A3s_t + A1(ψ_t + φ_t)`,
//!   `u8 = A4s_t − Bsᵀψ_t`, `u9 = A0s_t`, `u10 = Bs s_t`, `u11 = Bsᵀs_t`, `u12 = A1s_t`
//!   (lines 29–36);
//! * for each `k ⪯ j`, dof `r`: `p1 = u11·ψ_r`, `p2 = u8·ψ_r + u9·α_r` and the writes of lines
//!   44–66 (see the code, which keeps the paper's line numbers).
//!
//! ## Per-pair products
//! Only `A1` and `A3` are formed as 6×6 matrices, each from force cross products column by
//! column (`(s×*)X` costs 108 products, half a dense 6×6 product; `A1 = P + Pᵀ` with
//! `P = (s_p×*)I`, and `B(s_p×) = −((s_p×*)Bᵀ)ᵀ`). The others are cross-bar matrices
//! `f×̄*`, applied as `(f×̄*)x = x ×* f` (18 products) from the forces `f0 = I s_p`,
//! `f4 = Bᵀs_p`, `f5`, `f7`. Since `(f×̄*)ᵀ = −f×̄*` and `A1` is symmetric, `Bs = A1 + A0` and
//! `A2 = A0 − A1 = −Bsᵀ`, which makes `u2 = u12`, `u10 = u12 + u9`, `u11 = u12 − u9`,
//! `u5 = u8 = A0ψ_t − A1ψ_t + A4s_t`, `u6 = A1ψ_t + A0ψ_t + A7s_t` and
//! `u4 = s_p ×* (I s_t) + u9`; `u1`, `u7` are used only for `j ≠ i`, `u4` only for `j = i`.
//! Per dof `r`, `u10·s_r`, `u11·s_r` and `u12·s_r` are `g + c`, `g − c`, `g` with
//! `g = u12·s_r`, `c = u9·s_r`.
//!
//! Composites are accumulated in a separate backward sweep first, so the order of the outer
//! loop is irrelevant (every entry written for body `i` has one dof of joint `i` and two of
//! its ancestors, so different `i` write disjoint entries). The loops over `p`, `t`, `r`
//! visit both orders of a multi-dof joint's dofs: that is how the non-symmetric same-joint
//! blocks are filled. Cost O(N·d²) (d = tree depth). Every call writes the same set of
//! (structurally non-zero) entries, so the tensors are cleared only when the tree changes.
//!
//! ## Write order
//! Each triple `(p, t, r)` writes about twenty entries, permutations of its indices in the
//! four tensors; nine have the shallowest index `r` first, `nv²` entries apart from one `r`
//! to the next. With `p` outermost, the entries that differ only in `p` (adjacent in memory
//! for the permutations with `p` last, `nv` or `nv²` apart for the others, but written for
//! every `(t, r)`) were evicted before the next `p` came back to them: on a 100-link chain
//! (32 MB of tensors) the writes were most of the time. The deepest dofs are therefore taken
//! eight at a time (`BLOCK`), innermost: for each `(t, r)` the block's entries are written one
//! after another, sharing cache lines. Same entries, same values, same bits; ∂²RNEA 0.73×
//! and 0.75× on chain50 and chain100 (generated tables, session 28), 0.78× on tree6 and
//! chain20, 0.89× on solo12.
//!
//! # External forces (`fext` of [`rnea_second_order`] and [`rnea_second_order_contracted`])
//! Body-frame wrenches `f^ext_i` (the convention of [`crate::rnea`]) turn with their
//! bodies: `∂F^ext_i/∂q_k = J_k ×* F^ext_i` for `k ⪯ i`, independent of `q̇`, `q̈`
//! ([`crate::rnea_derivatives`], "External forces"). This is the `f_i ×̄* S_k` term of the
//! paper's K11, so K11–K12 keep their form with `f_i ← f_i − F^ext_i`, and the composite force
//! enters Algorithm 1 only through them (line 22, `A5`): replacing `F^C_i` by
//! `F^C_i − F^{ext,C}_i` is the whole change. The second derivative of a wrench term,
//! `∂²(J_jᵀ F^{ext,C})/∂q∂q`, is thereby included (it is the `s_p ×* F^C` part of `A5`, and of
//! `f₅` in the contracted form); `∂²τ/∂q̇²`, `∂²τ/∂q∂q̇` and `∂M/∂q` do not change.
//! Checked by differences of [`crate::rnea_derivatives`] with `fext` in
//! `tests::external_force_second_order_matches_differences`.
//!
//! # Contracted forms without the tensors
//! `C_qq[j, k] = Σ_i λ_i ∂²τ_i/∂q_j∂q_k` (and `C_vv`, `C_qv` alike, same `(j, k)` meaning as
//! the tensors) are obtained by summing Algorithm 1's writes over the torque index
//! analytically. Each write has its torque on the deepest (`i`), middle (`j`) or shallowest
//! (`k`) of the three joints:
//! * torque on the shallowest joint: `Σ_{k ≺ j} λ_kᵀ S_kᵀ(·) = Λ̄_jᵀ(·)` with the "virtual
//!   velocity" `Λ_b = Σ_{l ⪯ b} J_l λ_l` (a forward recursion, like `V_b` with `λ` for `q̇`)
//!   and `Λ̄_b = Λ_{λ(b)}` (zero at a root);
//! * torque on the middle joint: `Σ_{k ⪯ j ≺ i} J_j λ_j = Λ̄_i − Λ̄_k`;
//! * torque on the deepest joint: the per-dof matrices are linear in `s_p` for fixed `I^C_i`,
//!   `B^C_i`, so `Σ_{i ⪰ j} Σ_p λ_{ip}(·)` only needs subtree sums over `i ⪰ j` of
//!   `σ_i = J_iλ_i`: `Y_j = Σ I^C_i σ_i`, `X_j = Σ B^{C T}_i σ_i`,
//!   `W_j = Σ (σ_i×*)I^C_i − I^C_i(σ_i×)` and `Z_j = W_j + Y_j ×̄*` (`= Σ 𝔅(I^C_i, σ_i)`).
//!
//! For a pair (dof `c` of joint `i`, dof `r` of an ancestor-or-self joint `b ⪯ i`), the
//! middle- and shallowest-joint terms carry `Λ̄_i − Λ̄_b` and `Λ̄_b`, applied to the *same*
//! products of lines 46–49 and 53/56/59–61 (`u1 ↔ u3, u7`; `u2`; `u11 ↔ u6, u10`), so they
//! add up to terms in `Λ̄_i` alone — per dof `c`: `A1ᵀΛ̄_i`, `BsᵀΛ̄_i`, `A3ᵀΛ̄_i` — except the
//! `A5`, `A7` parts of `u3`, `u6`, which become `f₅·κ_r`, `f₇·κ_r` with `A5 = f₅×̄*`,
//! `A7 = f₇×̄*` and `κ_r = Λ̄_b ×ₘ J_r` (from `⟨a ×ₘ m, f⟩ = −⟨m, a ×* f⟩`). The products
//! with `A1`, `A3`, `A6` are evaluated from that identity too, without forming the matrices.
//! What remains is one double loop over pairs of dofs on a common path, exactly like the
//! first-order derivatives: O(N·d) with ~15 6×6 matrix–vector products per dof and 6
//! six-vector dot products per pair; no `nv³` storage. For `b ≠ i` the result is symmetric in
//! `(c, r)` for `C_qq` and `C_vv` (different joints commute).

use crate::algorithms::rnea_derivatives::world_forward_pass;
use crate::check::{check_configuration, check_forces, check_tangent};
use crate::error::Result;
use crate::model::Model;
use crate::workspace::Workspace;
use nalgebra::{DMatrix, Matrix6, Vector6};
use vidyn_spatial::{dot6, Force, Motion, Tensor3};

/// The four second-order partials of inverse dynamics, borrowed from a
/// [`SecondOrderWorkspace`]. Layout: see the module documentation (`[i, j, k]` = torque,
/// inner, outer derivative; C order).
#[derive(Debug)]
pub struct RneaSecondOrder<'w> {
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q_k (∂τ_i/∂q_j)`.
    pub d2tau_dq2: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q̇_k (∂τ_i/∂q̇_j)`, symmetric in `j, k`.
    pub d2tau_dv2: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂/∂q̇_k (∂τ_i/∂q_j)` — `j` is q, `k` is q̇.
    pub d2tau_dqdv: &'w Tensor3,
    /// `(nv, nv, nv)`: `[i, j, k] = ∂M_ij/∂q_k`, symmetric in `i, j`.
    pub dm_dq: &'w Tensor3,
}

/// The `λ`-contracted second-order partials, borrowed from the [`Workspace`]:
/// `[j, k] = Σ_i λ_i T[i, j, k]` for each tensor `T` of [`RneaSecondOrder`] (same meaning of
/// `j` and `k`).
#[derive(Debug)]
pub struct RneaSecondOrderContracted<'w> {
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q_k (∂τ_i/∂q_j)`.
    pub d2tau_dq2: &'w DMatrix<f64>,
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q̇_k (∂τ_i/∂q̇_j)`, symmetric.
    pub d2tau_dv2: &'w DMatrix<f64>,
    /// `(nv, nv)`: `[j, k] = Σ_i λ_i ∂/∂q̇_k (∂τ_i/∂q_j)` — `j` is q, `k` is q̇.
    pub d2tau_dqdv: &'w DMatrix<f64>,
}

/// Scratch of the second-order algorithms that fits in O(n + nv²), kept in every
/// [`Workspace`] (field `second_order`). Sizes: `n` bodies, `nv` dofs.
#[derive(Clone, Debug)]
pub struct SecondOrderScratch {
    /// `(nv,)` per dof, world frame: `[J_k, ψ_k, α_k, φ_k]` as 6-vectors (`[lin; ang]`).
    pub dof: Vec<[Vector6<f64>; 4]>,
    /// `(n,)` `σ_b = Σ_{k ∈ b} J_k λ_k`. Contracted forms.
    pub sigma: Vec<Vector6<f64>>,
    /// `(n,)` `Λ̄_b = Σ_{l ≺ b} σ_l` (the parent's virtual velocity). Contracted forms.
    pub lambda_parent: Vec<Vector6<f64>>,
    /// `(nv,)` `κ_k = Λ̄_b ×ₘ J_k` for dof `k` of body `b`. Contracted forms.
    pub kappa: Vec<Vector6<f64>>,
    /// `(n,)` subtree sums `Y_b = Σ_{i ⪰ b} I^C_i σ_i`. Contracted forms.
    pub sum_y: Vec<Vector6<f64>>,
    /// `(n,)` subtree sums `X_b = Σ_{i ⪰ b} B^{C T}_i σ_i`. Contracted forms.
    pub sum_x: Vec<Vector6<f64>>,
    /// `(n,)` subtree sums `W_b = Σ_{i ⪰ b} (σ_i×*)I^C_i − I^C_i(σ_i×)` (symmetric).
    pub sum_w: Vec<Matrix6<f64>>,
    /// `(nv, nv)` `λᵀ ∂²τ/∂q²`. Contracted forms.
    pub d2tau_dq2: DMatrix<f64>,
    /// `(nv, nv)` `λᵀ ∂²τ/∂q̇²`. Contracted forms.
    pub d2tau_dv2: DMatrix<f64>,
    /// `(nv, nv)` `λᵀ ∂²τ/∂q∂q̇`. Contracted forms.
    pub d2tau_dqdv: DMatrix<f64>,
    /// `(nv,)` `μ = M⁻¹λ`. Contracted forward-dynamics forms.
    pub mu: Vec<f64>,
    /// `(nv, nv)` `λᵀ ∂²q̈/∂q²`. [`crate::aba_second_order_contracted`].
    pub d2ddq_dq2: DMatrix<f64>,
    /// `(nv, nv)` `λᵀ ∂²q̈/∂q̇²`. [`crate::aba_second_order_contracted`].
    pub d2ddq_dv2: DMatrix<f64>,
    /// `(nv, nv)` `λᵀ ∂²q̈/∂q∂q̇`. [`crate::aba_second_order_contracted`].
    pub d2ddq_dqdv: DMatrix<f64>,
    /// `(nv, nv)` `λᵀ ∂²q̈/∂τ∂q`. [`crate::aba_second_order_contracted`].
    pub d2ddq_dtaudq: DMatrix<f64>,
    /// `(nv, nv)` scratch of [`crate::aba_second_order_contracted`].
    pub scratch: [DMatrix<f64>; 2],
}

impl SecondOrderScratch {
    pub(crate) fn new(model: &Model) -> Self {
        let (n, nv) = (model.nbodies(), model.nv);
        Self {
            dof: vec![[Vector6::zeros(); 4]; nv],
            sigma: vec![Vector6::zeros(); n],
            lambda_parent: vec![Vector6::zeros(); n],
            kappa: vec![Vector6::zeros(); nv],
            sum_y: vec![Vector6::zeros(); n],
            sum_x: vec![Vector6::zeros(); n],
            sum_w: vec![Matrix6::zeros(); n],
            d2tau_dq2: DMatrix::zeros(nv, nv),
            d2tau_dv2: DMatrix::zeros(nv, nv),
            d2tau_dqdv: DMatrix::zeros(nv, nv),
            mu: vec![0.0; nv],
            d2ddq_dq2: DMatrix::zeros(nv, nv),
            d2ddq_dv2: DMatrix::zeros(nv, nv),
            d2ddq_dqdv: DMatrix::zeros(nv, nv),
            d2ddq_dtaudq: DMatrix::zeros(nv, nv),
            scratch: [DMatrix::zeros(nv, nv), DMatrix::zeros(nv, nv)],
        }
    }
}

/// Workspace of [`rnea_second_order`]: an ordinary [`Workspace`] plus the four
/// `(nv, nv, nv)` output tensors (`4·nv³` doubles — 1.5 MB at nv = 36, 32 MB at nv = 100),
/// kept out of [`Workspace`] so that only callers of the full tensors pay for them. Create
/// it once with [`Model::second_order_workspace`]; [`rnea_second_order`] then allocates
/// nothing. The embedded `workspace` can be used with every other algorithm.
///
/// The tensors are only readable (through [`rnea_second_order`]'s result or the getters):
/// the algorithm writes the same structurally non-zero entries on every call, so it clears
/// the `4·nv³` entries only when the tree structure differs from the previous call's (a
/// saving of O(nv³) per call, which dominates on branched trees).
#[derive(Clone, Debug)]
pub struct SecondOrderWorkspace {
    /// Ordinary scratch (placements, world-frame kinematics, composites).
    pub workspace: Workspace,
    d2tau_dq2: Tensor3,
    d2tau_dv2: Tensor3,
    d2tau_dqdv: Tensor3,
    dm_dq: Tensor3,
    /// `(parent, nv)` of every body of the tree whose non-zero pattern the tensors hold
    /// (every other entry is zero).
    structure: Vec<(Option<usize>, usize)>,
    /// The ancestors-or-self of a block's deepest joints, and per body the last block that
    /// listed it.
    ancestors: Vec<usize>,
    marks: Vec<usize>,
}

impl SecondOrderWorkspace {
    /// Allocates everything [`rnea_second_order`] needs for `model`.
    #[must_use]
    pub fn new(model: &Model) -> Self {
        let shape = [model.nv; 3];
        Self {
            workspace: Workspace::new(model),
            d2tau_dq2: Tensor3::zeros(shape),
            d2tau_dv2: Tensor3::zeros(shape),
            d2tau_dqdv: Tensor3::zeros(shape),
            dm_dq: Tensor3::zeros(shape),
            structure: structure(model).collect(),
            ancestors: Vec::with_capacity(model.nbodies()),
            marks: vec![usize::MAX; model.nbodies()],
        }
    }

    /// `∂²τ/∂q²` of the last [`rnea_second_order`] call, see [`RneaSecondOrder`].
    #[must_use]
    pub fn d2tau_dq2(&self) -> &Tensor3 {
        &self.d2tau_dq2
    }

    /// `∂²τ/∂q̇²` of the last call.
    #[must_use]
    pub fn d2tau_dv2(&self) -> &Tensor3 {
        &self.d2tau_dv2
    }

    /// `∂²τ/∂q∂q̇` of the last call.
    #[must_use]
    pub fn d2tau_dqdv(&self) -> &Tensor3 {
        &self.d2tau_dqdv
    }

    /// `∂M/∂q` of the last call.
    #[must_use]
    pub fn dm_dq(&self) -> &Tensor3 {
        &self.dm_dq
    }

    /// The scratch workspace, mutable, beside the four tensors `(∂²τ/∂q², ∂²τ/∂q̇², ∂²τ/∂q∂q̇,
    /// ∂M/∂q)`.
    pub(crate) fn workspace_and_tensors(&mut self) -> (&mut Workspace, [&Tensor3; 4]) {
        (&mut self.workspace, [&self.d2tau_dq2, &self.d2tau_dv2, &self.d2tau_dqdv, &self.dm_dq])
    }
}

fn structure(model: &Model) -> impl Iterator<Item = (Option<usize>, usize)> + '_ {
    model.parents.iter().zip(&model.joints).map(|(p, j)| (*p, j.nv()))
}

impl Model {
    /// A fresh [`SecondOrderWorkspace`] (workspace plus the `(nv, nv, nv)` tensors of
    /// [`rnea_second_order`]).
    #[must_use]
    pub fn second_order_workspace(&self) -> SecondOrderWorkspace {
        SecondOrderWorkspace::new(self)
    }
}

/// `(m×*)X` (six force cross products).
#[inline]
fn cross_force_mul(m: &Vector6<f64>, x: &Matrix6<f64>) -> Matrix6<f64> {
    Motion::from_vector(m).cross_force_mul(x)
}

/// `f ×̄*`, the matrix with `(f ×̄*) m = m ×* f`.
#[inline]
fn crossbar(f: &Vector6<f64>) -> Matrix6<f64> {
    Force::from_vector(f).cross_bar_matrix()
}

/// `a ×ₘ b`.
#[inline]
fn cross_motion(a: &Vector6<f64>, b: &Vector6<f64>) -> Vector6<f64> {
    Motion::from_vector(a).cross_motion(&Motion::from_vector(b)).to_vector()
}

/// `m ×* f`.
#[inline]
fn cross_force(m: &Vector6<f64>, f: &Vector6<f64>) -> Vector6<f64> {
    Motion::from_vector(m).cross_force(&Force::from_vector(f)).to_vector()
}

/// `(s×*)I − I(s×)` for a symmetric `I`: with `P = (s×*)I`, `I(s×) = −Pᵀ`, so it is `P + Pᵀ`.
#[inline]
fn inertia_rate(i: &Matrix6<f64>, s: &Vector6<f64>) -> Matrix6<f64> {
    let p = cross_force_mul(s, i);
    p + p.transpose()
}

/// World-frame forward pass and composite sums shared by both algorithms: fills
/// `ws.derivatives.{columns, psi, phi, alpha, velocities, accelerations, composite_*}`
/// (exactly as [`crate::rnea_derivatives`] does, `B` without the ½) and
/// `ws.second_order.dof`. O(n).
fn forward_and_composites(model: &Model, ws: &mut Workspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) {
    world_forward_pass(model, ws, q, v, a, fext);
    let d = &ws.derivatives;
    for (k, dof) in ws.second_order.dof.iter_mut().enumerate() {
        *dof = [d.columns[k].to_vector(), d.psi[k].to_vector(), d.alpha[k].to_vector(), d.phi[k].to_vector()];
    }
}

/// Second-order partial derivatives of `τ = rnea(q, v, a)` by IDSVA-SO (Singh, Russell &
/// Wensing 2023, Algorithm 1 with the digest's errata), in the world frame:
/// $$\frac{\partial^2\tau}{\partial q^2},\ \frac{\partial^2\tau}{\partial\dot q^2},\
///   \frac{\partial^2\tau}{\partial q\,\partial\dot q},\ \frac{\partial M}{\partial q}
///   \;(=\tfrac{\partial^2\tau}{\partial\ddot q\,\partial q})$$
/// `q`: (nq,), `v`, `a`: (nv,); four `(nv, nv, nv)` tensors, `[i, j, k]` = torque, inner,
/// outer derivative, C order (the module documentation states the layout and the manifold
/// convention precisely). `∂²τ/∂q̈² = ∂²τ/∂q̈∂q̇ = 0` are not returned.
/// Cost O(N·d²) (d = tree depth); no allocation (the tensors are cleared only when the
/// workspace is used with a different tree, see [`SecondOrderWorkspace`]).
/// Errors: wrong lengths, non-finite entries, non-unit quaternions.
/// Checked against central differences of [`crate::rnea_derivatives`] (and of
/// [`crate::crba`] for `∂M/∂q`) in `tests::rnea_second_order_matches_differences_of_first_order`.
/// With `fext` (the wrenches of [`crate::rnea`]), which change `∂²τ/∂q²` only (module
/// documentation, "External forces").
pub fn rnea_second_order<'w>(
    model: &Model,
    ws: &'w mut SecondOrderWorkspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    fext: Option<&[Force]>,
) -> Result<RneaSecondOrder<'w>> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, a, "a")?;
    if let Some(f) = fext {
        check_forces(model, f, "fext")?;
    }
    rnea_second_order_unchecked(model, ws, q, v, a, fext);
    Ok(RneaSecondOrder { d2tau_dq2: &ws.d2tau_dq2, d2tau_dv2: &ws.d2tau_dv2, d2tau_dqdv: &ws.d2tau_dqdv, dm_dq: &ws.dm_dq })
}

/// Algorithm 1 without argument checks (results in the workspace's tensors).
pub(crate) fn rnea_second_order_unchecked(model: &Model, ws: &mut SecondOrderWorkspace, q: &[f64], v: &[f64], a: &[f64], fext: Option<&[Force]>) {
    let nv = model.nv;
    assert_eq!(ws.d2tau_dq2.shape(), [nv; 3], "rnea_second_order: the workspace was created for a model with another nv");
    forward_and_composites(model, &mut ws.workspace, q, v, a, fext);
    let d = &ws.workspace.derivatives;
    let dof = &ws.workspace.second_order.dof;
    let hqq = ws.d2tau_dq2.as_mut_slice();
    let hvv = ws.d2tau_dv2.as_mut_slice();
    let hqv = ws.d2tau_dqdv.as_mut_slice();
    let dm = ws.dm_dq.as_mut_slice();
    if ws.structure.len() != model.nbodies() || !structure(model).eq(ws.structure.iter().copied()) {
        // another tree: its zero pattern differs, clear everything once
        hqq.fill(0.0);
        hvv.fill(0.0);
        hqv.fill(0.0);
        dm.fill(0.0);
        ws.structure.clear();
        ws.structure.extend(structure(model));
    }
    ws.marks.clear();
    ws.marks.resize(model.nbodies(), usize::MAX);
    let mut tensors = Tensors { hqq, hvv, hqv, dm, nv };
    let mut deep = [DeepTerms::default(); BLOCK];
    let (mut filled, mut block) = (0, 0);
    for i in 0..model.nbodies() {
        let (ic, bc, fc) = (&d.composite_inertias[i], &d.composite_b[i], d.composite_forces[i].to_vector());
        for p in model.idx_v[i]..model.idx_v[i] + model.joints[i].nv() {
            deep[filled] = DeepTerms::new(p, i, ic, bc, &fc, &dof[p]);
            filled += 1;
            if filled == BLOCK || p + 1 == nv {
                write_block(model, dof, &deep[..filled], (&mut ws.ancestors, &mut ws.marks, block), &mut tensors);
                (filled, block) = (0, block + 1);
            }
        }
    }
}

/// The four output tensors' entries, C order (`[i, j, k]` at `(i·nv + j)·nv + k`).
struct Tensors<'a> {
    hqq: &'a mut [f64],
    hvv: &'a mut [f64],
    hqv: &'a mut [f64],
    dm: &'a mut [f64],
    nv: usize,
}

/// Lines 44–66 of Algorithm 1 for the deepest dofs `deep` taken together (module
/// documentation, "Write order"): for each joint `j` that is an ancestor-or-self of one of
/// theirs (listed once in `ancestors`, `marks[j] = block`), each dof `t` of `j`, each dof `r` of
/// an ancestor-or-self `k` of `j`, the entries of every deepest dof below `j`. One index of
/// every write is in the block, so the entries that differ only in it share cache lines,
/// written one after another.
fn write_block(
    model: &Model,
    dof: &[[Vector6<f64>; 4]],
    deep: &[DeepTerms],
    (ancestors, marks, block): (&mut Vec<usize>, &mut [usize], usize),
    h: &mut Tensors,
) {
    let nv = h.nv;
    let at = |i: usize, j: usize, k: usize| (i * nv + j) * nv + k;
    let dofs = |b: usize| model.idx_v[b]..model.idx_v[b] + model.joints[b].nv();
    ancestors.clear();
    for e in deep {
        let mut jb = Some(e.body);
        while let Some(j) = jb.filter(|&j| marks[j] != block) {
            marks[j] = block;
            ancestors.push(j);
            jb = model.parents[j];
        }
    }
    let mut pair = [PairTerms::default(); BLOCK];
    for &j in ancestors.iter() {
        for t in dofs(j) {
            let [st, psit, alphat, phit] = dof[t];
            for (u, e) in pair.iter_mut().zip(deep).filter(|(_, e)| model.is_ancestor(j, e.body)) {
                *u = PairTerms::new(e, j == e.body, &st, &psit, &alphat, &phit);
            }
            let mut kb = Some(j);
            while let Some(k) = kb {
                for r in dofs(k) {
                    let [sr, psir, alphar, phir] = dof[r];
                    let phipsi = phir + psir;
                    for (u, e) in pair.iter().zip(deep).filter(|(_, e)| model.is_ancestor(j, e.body)) {
                        let (p, i) = (e.p, e.body);
                        let p1 = dot6(&u.u11, &psir);
                        let p2 = dot6(&u.u8, &psir) + dot6(&u.u9, &alphar);
                        // u12·s_r, u9·s_r: also u11·s_r = g − c, u10·s_r = g + c
                        let (g, c) = (dot6(&u.u12, &sr), dot6(&u.u9, &sr));
                        h.hqq[at(p, t, r)] = p2; // line 44
                        h.hqv[at(p, r, t)] = -p1;
                        if j != i {
                            let x = dot6(&u.u1, &psir) + dot6(&u.u12, &alphar); // line 46
                            h.hqq[at(t, r, p)] = x;
                            h.hqq[at(t, p, r)] = x;
                            h.hqv[at(t, p, r)] = dot6(&u.u1, &sr) + dot6(&u.u12, &phipsi); // 47
                            h.hqv[at(t, r, p)] = p1; // 48
                            h.hvv[at(t, r, p)] = g - c; // 49
                            h.hvv[at(t, p, r)] = g - c;
                            h.dm[at(r, t, p)] = g; // 50
                            h.dm[at(t, r, p)] = g;
                        }
                        if k != j {
                            h.hqq[at(p, r, t)] = p2; // line 53
                            let x = dot6(&sr, &u.u3);
                            h.hqq[at(r, p, t)] = x;
                            h.hvv[at(p, t, r)] = c - g; // 54
                            h.hvv[at(p, r, t)] = c - g;
                            h.hqv[at(p, t, r)] = dot6(&sr, &u.u8) + dot6(&u.u9, &phipsi); // 55
                            h.hqv[at(r, t, p)] = dot6(&sr, &u.u6); // 56
                            h.dm[at(r, p, t)] = c; // 57
                            h.dm[at(p, r, t)] = c;
                            if j != i {
                                h.hqq[at(r, t, p)] = x; // 59
                                h.hqv[at(r, p, t)] = dot6(&sr, &u.u7); // 60
                                h.hvv[at(r, p, t)] = g + c; // 61
                                h.hvv[at(r, t, p)] = g + c;
                            } else {
                                h.hvv[at(r, t, p)] = dot6(&sr, &u.u4); // 63
                            }
                        } else {
                            h.hvv[at(p, t, r)] = -g; // 66
                        }
                    }
                }
                kb = model.parents[k];
            }
        }
    }
}

/// How many deepest dofs [`rnea_second_order`] takes together.
const BLOCK: usize = 8;

/// Lines 15–24 of Algorithm 1 for dof `p` of the deepest joint (body `body`): the matrices
/// `A1`, `A3` and the forces of the cross-bar matrices `A0 = f0×̄*`, `A4 = f4×̄*`, `A5 = f5×̄*`,
/// `A7 = f7×̄*` (module documentation, "Per-pair products").
#[derive(Clone, Copy, Default)]
struct DeepTerms {
    p: usize,
    body: usize,
    sp: Vector6<f64>,
    ic: Matrix6<f64>,
    a1: Matrix6<f64>,
    a3: Matrix6<f64>,
    f0: Vector6<f64>,
    f4: Vector6<f64>,
    f5: Vector6<f64>,
    f7: Vector6<f64>,
}

impl DeepTerms {
    fn new(p: usize, body: usize, ic: &Matrix6<f64>, bc: &Matrix6<f64>, fc: &Vector6<f64>, dof: &[Vector6<f64>; 4]) -> Self {
        let [sp, psip, alphap, phip] = *dof;
        let a3 = inertia_rate(ic, &psip) + crossbar(&(ic * psip)) + cross_force_mul(&sp, bc) + cross_force_mul(&sp, &bc.transpose()).transpose();
        Self {
            p,
            body,
            sp,
            ic: *ic,
            a1: inertia_rate(ic, &sp),
            a3,
            f0: ic * sp,
            f4: bc.tr_mul(&sp),
            f5: bc * psip + ic * alphap + cross_force(&sp, fc),
            f7: bc * sp + ic * (psip + phip),
        }
    }
}

/// Lines 29–36 for a deepest dof and a dof `t` of an ancestor-or-self joint (`s_t`, `ψ_t`,
/// `α_t`, `φ_t`); `u1`, `u7` only when the joints differ (their only uses), `u4` only when
/// they are the same joint.
#[derive(Clone, Copy, Default)]
struct PairTerms {
    u1: Vector6<f64>,
    u3: Vector6<f64>,
    u4: Vector6<f64>,
    u6: Vector6<f64>,
    u7: Vector6<f64>,
    u8: Vector6<f64>,
    u9: Vector6<f64>,
    u11: Vector6<f64>,
    u12: Vector6<f64>,
}

impl PairTerms {
    #[inline]
    fn new(e: &DeepTerms, same_joint: bool, st: &Vector6<f64>, psit: &Vector6<f64>, alphat: &Vector6<f64>, phit: &Vector6<f64>) -> Self {
        let u12 = e.a1 * st;
        let u9 = cross_force(st, &e.f0);
        let (a1_psi, a0_psi) = (e.a1 * psit, cross_force(psit, &e.f0));
        let (u1, u7, u4) = if same_joint {
            (Vector6::zeros(), Vector6::zeros(), cross_force(&e.sp, &(e.ic * st)) + u9)
        } else {
            (e.a3.tr_mul(st), e.a3 * st + e.a1 * (psit + phit), Vector6::zeros())
        };
        Self {
            u1,
            u3: e.a3 * psit + e.a1 * alphat + cross_force(st, &e.f5),
            u4,
            u6: a1_psi + a0_psi + cross_force(st, &e.f7),
            u7,
            u8: a0_psi - a1_psi + cross_force(st, &e.f4),
            u9,
            u11: u12 - u9,
            u12,
        }
    }
}

/// The `λ`-contracted second-order partials of `τ = rnea(q, v, a)`,
/// $$\sum_i \lambda_i \frac{\partial^2\tau_i}{\partial q^2},\quad
///   \sum_i \lambda_i \frac{\partial^2\tau_i}{\partial\dot q^2},\quad
///   \sum_i \lambda_i \frac{\partial^2\tau_i}{\partial q\,\partial\dot q}$$
/// (`[j, k]` = inner, outer derivative as in [`RneaSecondOrder`]; for the mixed one `j` is q
/// and `k` is q̇), computed **without forming the tensors** by summing Algorithm 1's writes
/// over the torque index analytically (module documentation, "Contracted forms").
/// `q`: (nq,), `v`, `a`, `lambda`: (nv,); three `(nv, nv)` matrices in `ws.second_order`.
/// Cost O(N·d) like [`crate::rnea_derivatives`] (≈ 1.1–1.5× its time), no allocation.
/// Overwrites the world-frame kinematic scratch of `ws.derivatives` (not its result
/// matrices). Checked against the contraction of [`rnea_second_order`]'s tensors in
/// `tests::rnea_second_order_contracted_matches_contraction`.
/// `fext`: the optional wrenches of [`crate::rnea`].
pub fn rnea_second_order_contracted<'w>(
    model: &Model,
    ws: &'w mut Workspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    lambda: &[f64],
    fext: Option<&[Force]>,
) -> Result<RneaSecondOrderContracted<'w>> {
    check_configuration(model, q)?;
    check_tangent(model, v, "v")?;
    check_tangent(model, a, "a")?;
    check_tangent(model, lambda, "lam")?;
    if let Some(f) = fext {
        check_forces(model, f, "fext")?;
    }
    rnea_second_order_contracted_unchecked(model, ws, q, v, a, lambda, fext);
    let so = &ws.second_order;
    Ok(RneaSecondOrderContracted { d2tau_dq2: &so.d2tau_dq2, d2tau_dv2: &so.d2tau_dv2, d2tau_dqdv: &so.d2tau_dqdv })
}

/// The contracted forms without argument checks (results in `ws.second_order.d2tau_*`).
pub(crate) fn rnea_second_order_contracted_unchecked(
    model: &Model,
    ws: &mut Workspace,
    q: &[f64],
    v: &[f64],
    a: &[f64],
    lambda: &[f64],
    fext: Option<&[Force]>,
) {
    forward_and_composites(model, ws, q, v, a, fext);
    let n = model.nbodies();
    let d = &ws.derivatives;
    let so = &mut ws.second_order;
    let dofs = |b: usize| model.idx_v[b]..model.idx_v[b] + model.joints[b].nv();
    // σ, Λ̄, κ (forward), then the subtree sums Y, X, W (backward)
    for b in 0..n {
        let lbar = match model.parents[b] {
            Some(p) => so.lambda_parent[p] + so.sigma[p],
            None => Vector6::zeros(),
        };
        so.lambda_parent[b] = lbar;
        let mut sigma = Vector6::zeros();
        for c in dofs(b) {
            let s = so.dof[c][0];
            sigma += s * lambda[c];
            so.kappa[c] = cross_motion(&lbar, &s);
        }
        so.sigma[b] = sigma;
        let ic = &d.composite_inertias[b];
        so.sum_y[b] = ic * sigma;
        so.sum_x[b] = d.composite_b[b].tr_mul(&sigma);
        so.sum_w[b] = inertia_rate(ic, &sigma);
    }
    for b in (0..n).rev() {
        if let Some(p) = model.parents[b] {
            let (y, x, w) = (so.sum_y[b], so.sum_x[b], so.sum_w[b]);
            so.sum_y[p] += y;
            so.sum_x[p] += x;
            so.sum_w[p] += w;
        }
    }
    let (cqq, cvv, cqv) = (&mut so.d2tau_dq2, &mut so.d2tau_dv2, &mut so.d2tau_dqdv);
    cqq.as_mut_slice().fill(0.0);
    cvv.as_mut_slice().fill(0.0);
    cqv.as_mut_slice().fill(0.0);
    let (dof, kappa) = (&so.dof, &so.kappa);
    for i in 0..n {
        let (ic, bc) = (&d.composite_inertias[i], &d.composite_b[i]);
        let fc = d.composite_forces[i].to_vector();
        let (ysum, xsum, wsum) = (so.sum_y[i], so.sum_x[i], &so.sum_w[i]);
        let lb = so.lambda_parent[i];
        let (il, btl) = (ic * lb, bc.tr_mul(&lb));
        for c in dofs(i) {
            let [s, psi, alpha, phi] = dof[c];
            // Σ over the deepest joint (subtree sums), dof c as Algorithm 1's (j, t); with
            // Z = W + Y×̄* (W symmetric, Y×̄* skew): Zᵀx = Wx − x×*Y, Zx = Wx + x×*Y
            let (w2, w_psi) = (wsum * s, wsum * psi);
            let (s_x, s_y, psi_y) = (cross_force(&s, &xsum), cross_force(&s, &ysum), cross_force(&psi, &ysum));
            let w8 = s_x - w_psi + psi_y;
            let w9 = s_y;
            let w11 = w2 - s_y;
            let w5 = psi_y - w_psi + s_x;
            // dof c as Algorithm 1's (i, p), contracted with Λ̄_i: A1ᵀΛ̄, BsᵀΛ̄, A3ᵀΛ̄, A6ᵀΛ̄
            // (from ⟨a×b, f⟩ = −⟨b, a×*f⟩ and (f×̄*)ᵀ = −f×̄*, without forming the matrices)
            let (is, ipsi) = (ic * s, ic * psi);
            let i_sxl = ic * cross_motion(&s, &lb);
            let g1 = cross_force(&s, &il) - i_sxl;
            let gb = g1 - cross_force(&lb, &is);
            let g3 =
                cross_force(&psi, &il) - ic * cross_motion(&psi, &lb) - cross_force(&lb, &ipsi) - bc.tr_mul(&cross_motion(&s, &lb)) + cross_force(&s, &btl);
            let h6 = -i_sxl - cross_force(&lb, &is);
            let f5 = bc * psi + ic * alpha + cross_force(&s, &fc); // A5 = f5 ×̄*
            let f7 = bc * s + ic * (psi + phi); // A7 = f7 ×̄*
            let (e_psi, e_alpha, e_v, e_s) = (w8 + g3, w9 + g1, gb - w11, w5 + g3);
            let mut body = Some(i);
            while let Some(b) = body {
                for r in dofs(b) {
                    let [sr, psir, alphar, phir] = dof[r];
                    let x = e_psi.dot(&psir) + e_alpha.dot(&alphar) + f5.dot(&kappa[r]);
                    cqq[(c, r)] += x;
                    cqv[(r, c)] += e_v.dot(&psir) + f7.dot(&kappa[r]);
                    if b != i {
                        cqq[(r, c)] += x;
                        cqv[(c, r)] += e_s.dot(&sr) + e_alpha.dot(&(phir + psir));
                        let y = e_v.dot(&sr);
                        cvv[(c, r)] += y;
                        cvv[(r, c)] += y;
                    } else {
                        cvv[(c, r)] -= w2.dot(&sr);
                        cvv[(r, c)] += h6.dot(&sr);
                    }
                }
                body = model.parents[b];
            }
        }
    }
}
