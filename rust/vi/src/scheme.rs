//! Discretisations of the action over one step: Galerkin–Lobatto schemes of any order (Fan,
//! Schultz & Murphey 2018, §2) and the midpoint rule (Johnson 2012 §3.2, the rule of `trep`).
//!
//! On one step the trajectory is the degree-s polynomial through the control points
//! `q^α = q(t_k + c_α Δt)`, `α = 0..s`, with `c` the Gauss–Lobatto nodes on `[0, 1]`
//! (`c_0 = 0`, `c_s = 1`). Its velocity at the nodes is `q̇^α = (1/Δt) Σ_β b[α][β] q^β` with
//! `b[α][β] = ℓ'_β(c_α)` (Lagrange basis), and the action integral is approximated by Lobatto
//! quadrature with weights `w` (`Σ w = 1`) at the same nodes. The resulting variational
//! integrator has order `2s` (Ober-Blöbaum & Saake 2015).
//!
//! # Control points versus step variables
//!
//! Both families are written as `L_d = Δt Σ_α w_α L(q^α, q̇^α)` over control points `q^α`
//! whose velocities are `q̇^α = (1/Δt) Σ_β b[α][β] q^β`. The DEL equations are stationarity
//! conditions in the *step variables* `x = (q_k, interior points, q_{k+1})`, and the control
//! points are linear in them, `q^α = Σ_x T[α][x] x`; so the DEL row of step variable `x` is
//! `Σ_α T[α][x] (D_α L_d + Q^α)` with `D_α` the partial derivative in `q^α` holding the other
//! control points fixed. [`Scheme::mix`] stores `Tᵀ` and [`Scheme::endpoint`] the row of `T⁻¹`
//! that gives `q_{k+1}`. For Lobatto schemes the control points are the step variables
//! (`T = 1`). The midpoint rule `L_d = Δt L((q_k + q_{k+1})/2, (q_{k+1} − q_k)/Δt)` has the
//! two control points `q^0 = q_k` (weight 0) and `q^1 = q̄ = (q_k + q_{k+1})/2` (weight 1,
//! velocity `2(q̄ − q_k)/Δt`), so `T = [[1, 0], [½, ½]]`: `r = p_k + D_0 L_d + ½ D_1 L_d`,
//! `p_{k+1} = ½ D_1 L_d`, `q_{k+1} = 2 q̄ − q_k`. The unknowns of the Newton solve are always
//! the control points `q^1..q^s`. Every scheme here has `T[α][x] = 0` for `x > α` (a control
//! point depends on no later step variable), which the Newton factorisation relies on.

use crate::error::{Result, ViError};

/// Coefficients of one Galerkin–Lobatto scheme with `s + 1` control points.
#[derive(Clone, Debug, PartialEq)]
pub struct Scheme {
    /// Number of intervals between control points (the scheme has order `2s`).
    pub s: usize,
    /// `(s+1,)` nodes on `[0, 1]`, increasing, `c[0] = 0`, `c[s] = 1`.
    pub nodes: Vec<f64>,
    /// `(s+1,)` quadrature weights, summing to 1.
    pub weights: Vec<f64>,
    /// `(s+1, s+1)` differentiation matrix, row-major: `b[α·(s+1) + β] = ℓ'_β(c_α)`.
    pub diff: Vec<f64>,
    /// `(s+1, s+1)` row mixing `Tᵀ`, row-major: the DEL row of step variable `x` is
    /// `Σ_α mix[x·(s+1) + α] (D_α L_d + Q^α)` (module docs). Identity for Lobatto schemes;
    /// always "upper triangular" (`mix[x][α] = 0` for `α < x`), which lets the Newton
    /// factorisation mix its rows in place.
    pub mix: Vec<f64>,
    /// `(s+1,)` `q_{k+1} = Σ_α endpoint[α] q^α` (`e_s` for Lobatto schemes).
    pub endpoint: Vec<f64>,
}

impl Scheme {
    /// The Lobatto scheme with `s + 1` points (`s ≥ 1`; `s ≤ 12` keeps the nodes accurate).
    pub fn lobatto(s: usize) -> Result<Self> {
        if !(1..=12).contains(&s) {
            return Err(ViError::InvalidScheme(format!("Lobatto order parameter s = {s}; expected 1 ≤ s ≤ 12")));
        }
        let x = lobatto_nodes(s);
        let nodes: Vec<f64> = x.iter().map(|xi| 0.5 * (xi + 1.0)).collect();
        let ns = s as f64;
        let weights: Vec<f64> = x.iter().map(|&xi| 1.0 / (ns * (ns + 1.0) * legendre(s, xi).0.powi(2))).collect();
        let p = s + 1;
        let mix = (0..p * p).map(|k| if k / p == k % p { 1.0 } else { 0.0 }).collect();
        let endpoint = (0..p).map(|a| if a == s { 1.0 } else { 0.0 }).collect();
        Ok(Self { s, diff: differentiation_matrix(&nodes), nodes, weights, mix, endpoint })
    }

    /// The midpoint rule `L_d(q_k, q_{k+1}) = Δt L((q_k + q_{k+1})/2, (q_{k+1} − q_k)/Δt)`
    /// (Johnson 2012 eq. 4.8, the discretisation of `trep`; order 2), with the forcing
    /// `Q = Δt/2 (u − d q̇ − κ (q̄ − rest))` on each end, evaluated at the midpoint. trep puts
    /// the whole impulse `Δt f` on the left end (`f⁺ = 0`); we split it evenly, as the Lobatto
    /// schemes do. Both are second-order discrete Lagrange–d'Alembert forces; the trajectories
    /// `q_k` differ at O(Δt²) and the momenta `p_k` by `Δt f/2`.
    #[must_use]
    pub fn midpoint() -> Self {
        Self {
            s: 1,
            nodes: vec![0.0, 0.5],
            weights: vec![0.0, 1.0],
            diff: vec![-2.0, 2.0, -2.0, 2.0],
            mix: vec![1.0, 0.5, 0.0, 0.5],
            endpoint: vec![-1.0, 2.0],
        }
    }

    /// The trapezoidal variational integrator (`s = 1`, order 2).
    #[must_use]
    pub fn trapezoid() -> Self {
        Self::lobatto(1).expect("s = 1 is valid")
    }

    /// The Simpson variational integrator (`s = 2`, order 4).
    #[must_use]
    pub fn simpson() -> Self {
        Self::lobatto(2).expect("s = 2 is valid")
    }

    /// Scheme by name: `"midpoint"`, `"trapezoid"`, `"simpson"` or `"lobatto"` with an
    /// explicit `s`.
    pub fn by_name(name: &str, s: Option<usize>) -> Result<Self> {
        match (name, s) {
            ("midpoint", None | Some(1)) => Ok(Self::midpoint()),
            ("trapezoid", None | Some(1)) => Ok(Self::trapezoid()),
            ("simpson", None | Some(2)) => Ok(Self::simpson()),
            ("lobatto", Some(s)) => Self::lobatto(s),
            ("lobatto", None) => Err(ViError::InvalidScheme("scheme 'lobatto' needs s (number of intervals per step)".into())),
            ("midpoint" | "trapezoid" | "simpson", Some(s)) => {
                let fixed = if name == "simpson" { 2 } else { 1 };
                Err(ViError::InvalidScheme(format!(
                    "scheme '{name}' has s = {fixed}, got s = {s}; give s = {fixed} (or none), or scheme 'lobatto' with s = {s}"
                )))
            }
            (other, _) => Err(ViError::InvalidScheme(format!("unknown scheme '{other}'; expected 'midpoint', 'trapezoid', 'simpson' or 'lobatto' (with s)"))),
        }
    }

    /// Number of control points, `s + 1`.
    #[inline]
    #[must_use]
    pub fn points(&self) -> usize {
        self.s + 1
    }

    /// `b[α][β] = ℓ'_β(c_α)`.
    #[inline]
    #[must_use]
    pub fn b(&self, alpha: usize, beta: usize) -> f64 {
        self.diff[alpha * (self.s + 1) + beta]
    }

    /// `Tᵀ[x][α]`: weight of control point `α`'s DEL row in step variable `x`'s row.
    #[inline]
    #[must_use]
    pub fn mix(&self, x: usize, alpha: usize) -> f64 {
        self.mix[x * (self.s + 1) + alpha]
    }

    /// Whether the DEL rows are combinations of the control-point rows (`T ≠ 1`).
    #[inline]
    #[must_use]
    pub fn mixes_rows(&self) -> bool {
        let p = self.s + 1;
        self.mix.iter().enumerate().any(|(k, &m)| m != if k / p == k % p { 1.0 } else { 0.0 })
    }

    /// `∂(row x)/∂u = Δt · Σ_α mix[x][α] w_α` divided by `Δt` (controls are constant over
    /// the step and enter each control-point row as `w_α Δt u`).
    #[must_use]
    pub fn control_weight(&self, x: usize) -> f64 {
        (0..=self.s).map(|a| self.mix(x, a) * self.weights[a]).sum()
    }

    /// `q_{k+1}` (or its variation) from the control points, `q^0 = q_k` first.
    #[inline]
    #[must_use]
    pub fn endpoint(&self, alpha: usize) -> f64 {
        self.endpoint[alpha]
    }

    /// Writes `q_{k+1} = endpoint[0] q_k + Σ_{γ≥1} endpoint[γ] z^γ` (`z = (q^1, …, q^s)`).
    pub fn endpoint_from(&self, q_k: &[f64], z: &[f64], q_next: &mut [f64]) {
        let n = q_k.len();
        for (i, out) in q_next.iter_mut().enumerate() {
            *out = self.endpoint[0] * q_k[i] + (1..=self.s).map(|g| self.endpoint[g] * z[(g - 1) * n + i]).sum::<f64>();
        }
    }

    /// Order of accuracy of the integrator, `2s`.
    #[must_use]
    pub fn order(&self) -> usize {
        2 * self.s
    }
}

/// `(P_n(x), P_{n−1}(x))` by the three-term recurrence.
fn legendre(n: usize, x: f64) -> (f64, f64) {
    let (mut p0, mut p1) = (1.0, x);
    if n == 0 {
        return (1.0, 0.0);
    }
    for k in 1..n {
        let kf = k as f64;
        let p2 = ((2.0 * kf + 1.0) * x * p1 - kf * p0) / (kf + 1.0);
        p0 = p1;
        p1 = p2;
    }
    (p1, p0)
}

/// Gauss–Lobatto nodes on `[−1, 1]`: `±1` and the roots of `P_s'`, by Newton's method on
/// `(1 − x²) P_s'(x) = s (P_{s−1}(x) − x P_s(x))` from Chebyshev–Lobatto starting points.
fn lobatto_nodes(s: usize) -> Vec<f64> {
    let pi = std::f64::consts::PI;
    let mut x: Vec<f64> = (0..=s).map(|k| -(pi * k as f64 / s as f64).cos()).collect();
    for xi in x.iter_mut().take(s).skip(1) {
        for _ in 0..100 {
            let (p, pm1) = legendre(s, *xi);
            // f = P_{s−1} − x P_s ∝ (1 − x²) P_s';  f' = −s(s+1)/(1−x²)·... use the identity
            // d/dx [P_{s−1} − x P_s] = −(s + 1) P_s  (from the Legendre recurrences)
            let f = pm1 - *xi * p;
            let df = -((s + 1) as f64) * p;
            let step = f / df;
            *xi -= step;
            if step.abs() < 1e-16 {
                break;
            }
        }
    }
    x
}

/// Differentiation matrix of the Lagrange basis at its own nodes (barycentric form).
fn differentiation_matrix(c: &[f64]) -> Vec<f64> {
    let m = c.len();
    let lambda: Vec<f64> = (0..m).map(|j| 1.0 / (0..m).filter(|&k| k != j).map(|k| c[j] - c[k]).product::<f64>()).collect();
    let mut d = vec![0.0; m * m];
    for a in 0..m {
        let mut diag = 0.0;
        for b in 0..m {
            if a != b {
                let x = (lambda[b] / lambda[a]) / (c[a] - c[b]);
                d[a * m + b] = x;
                diag -= x;
            }
        }
        d[a * m + a] = diag;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trapezoid_and_simpson_match_the_tables() {
        let t = Scheme::trapezoid();
        assert_eq!(t.nodes, [0.0, 1.0]);
        assert!((t.weights[0] - 0.5).abs() < 1e-15 && (t.weights[1] - 0.5).abs() < 1e-15);
        for (got, want) in t.diff.iter().zip([-1.0, 1.0, -1.0, 1.0]) {
            assert!((got - want).abs() < 1e-14);
        }
        let s = Scheme::simpson();
        for (got, want) in s.nodes.iter().zip([0.0, 0.5, 1.0]) {
            assert!((got - want).abs() < 1e-15);
        }
        for (got, want) in s.weights.iter().zip([1.0 / 6.0, 4.0 / 6.0, 1.0 / 6.0]) {
            assert!((got - want).abs() < 1e-15);
        }
        for (got, want) in s.diff.iter().zip([-3.0, 4.0, -1.0, -1.0, 0.0, 1.0, 1.0, -4.0, 3.0]) {
            assert!((got - want).abs() < 1e-13, "{got} vs {want}");
        }
    }

    #[test]
    fn four_point_lobatto_matches_the_closed_form() {
        let l = Scheme::lobatto(3).unwrap();
        let r5 = 5f64.sqrt();
        for (got, want) in l.nodes.iter().zip([0.0, (5.0 - r5) / 10.0, (5.0 + r5) / 10.0, 1.0]) {
            assert!((got - want).abs() < 1e-15);
        }
        for (got, want) in l.weights.iter().zip([1.0 / 12.0, 5.0 / 12.0, 5.0 / 12.0, 1.0 / 12.0]) {
            assert!((got - want).abs() < 1e-15);
        }
    }

    #[test]
    fn quadrature_and_differentiation_are_exact_on_polynomials() {
        for s in 1..=8 {
            let sc = Scheme::lobatto(s).unwrap();
            // Lobatto with s+1 points integrates degree ≤ 2s − 1 exactly
            for deg in 0..2 * s {
                let integral: f64 = sc.nodes.iter().zip(&sc.weights).map(|(c, w)| w * c.powi(deg as i32)).sum();
                assert!((integral - 1.0 / (deg as f64 + 1.0)).abs() < 1e-13, "s={s} deg={deg}");
            }
            // the differentiation matrix is exact on degree ≤ s
            for deg in 0..=s {
                for a in 0..=s {
                    let d: f64 = (0..=s).map(|b| sc.b(a, b) * sc.nodes[b].powi(deg as i32)).sum();
                    let exact = if deg == 0 { 0.0 } else { deg as f64 * sc.nodes[a].powi(deg as i32 - 1) };
                    assert!((d - exact).abs() < 1e-9, "s={s} deg={deg}: {d} vs {exact}");
                }
            }
        }
    }

    #[test]
    fn names_and_errors() {
        assert_eq!(Scheme::by_name("simpson", None).unwrap().s, 2);
        assert_eq!(Scheme::by_name("lobatto", Some(4)).unwrap().order(), 8);
        assert!(Scheme::by_name("lobatto", None).is_err());
        assert!(Scheme::by_name("rk4", None).is_err());
        assert!(Scheme::lobatto(0).is_err());
    }
}
