//! The right-hand-side sweeps of the Newton direction (module docs of the parent) with the factors of
//! [`NewtonFactorization::factorize`]: one right-hand side at a time (a Newton direction).

use super::{sized, NewtonFactorization, V6};
use crate::scheme::Scheme;
use vidyn_rbd::Model;

impl NewtonFactorization {
    /// Solves `J x = f` with the factors of [`Self::factorize`]: the `l, ζ, ξ̄, y` sweep (leaves
    /// to root) and the forward pass (root to leaves), O(s² n). `f`: `(s·n,)` indexed
    /// `ϱ·n + i` like the residual; `x`: `(s·n,)` indexed `(γ−1)·n + i` like the unknowns.
    /// The Newton direction is `solve(−r)`. ([`Self::solve_lanes`] is the same sweep for
    /// `LANES` right-hand sides, with the momentum row.)
    pub(crate) fn solve(&mut self, model: &Model, sc: &Scheme, dt: f64, f: &[f64], x: &mut [f64]) {
        match self.s {
            1 => self.solve_sized::<1>(model, sc, dt, f, x),
            _ => self.solve_sized::<0>(model, sc, dt, f, x),
        }
    }

    /// [`Self::solve`] for `s = S` known at compile time (`S = 0`: read at run time), as
    /// [`Self::factorize_sized`].
    fn solve_sized<const S: usize>(&mut self, model: &Model, sc: &Scheme, dt: f64, f: &[f64], x: &mut [f64]) {
        let (n, s) = (self.n, sized::<S>(self.s));
        let p = s + 1;
        let rows = if sc.mixes_rows() { p } else { s };
        let w = &sc.weights;
        let inv_dt = 1.0 / dt;
        self.l.fill(V6::zeros());
        self.zeta.fill(V6::zeros());
        for i in (0..n).rev() {
            let kp = i * p;
            // ξ̄^ϱ = w_ϱΔt ψ^ϱ·l^ϱ + S̄^ϱ·ζ^ϱ + Σ_β a^{ϱβ} S̄^β·l^β, and y = Λ̄ (f − ξ̄)
            for beta in 0..p {
                self.dots[beta] = self.col[kp + beta].dot(&self.l[kp + beta]);
            }
            for r in 0..rows {
                let mut xi = w[r] * dt * self.rate[kp + r].dot(&self.l[kp + r]) + self.col[kp + r].dot(&self.zeta[kp + r]);
                for beta in 0..p {
                    xi += w[beta] * sc.b(beta, r) * self.dots[beta];
                }
                self.xi_rows[r] = xi;
            }
            for x in 0..s {
                let xi: f64 = if rows == s { self.xi_rows[x] } else { (x..p).map(|a| sc.mix(x, a) * self.xi_rows[a]).sum() };
                self.small[x] = f[x * n + i] - xi;
            }
            let inv = &self.inv[i * s * s..(i + 1) * s * s];
            for gm in 0..s {
                let mut v = 0.0;
                for r in 0..s {
                    v += inv[gm * s + r] * self.small[r];
                }
                self.yv[i * s + gm] = v;
            }
            if let Some(par) = model.parents[i] {
                // B.1c, B.3c (with Ĥ, Φ̂)
                let (pp, y) = (par * p, &self.yv[i * s..(i + 1) * s]);
                for a in 0..p {
                    let mut acc = self.l[kp + a];
                    for gm in 0..s {
                        acc += self.h[(kp + a) * s + gm] * y[gm];
                    }
                    self.l[pp + a] += acc;
                }
                for r in 0..rows {
                    let mut acc = self.zeta[kp + r];
                    for gm in 0..s {
                        acc += self.phi[(kp + r) * s + gm] * y[gm];
                    }
                    self.zeta[pp + r] += acc;
                }
            }
        }
        // forward pass (digest §4): δq_i, η_i (stored at α = 1..s), δ̄v_i (α = 0..s)
        for i in 0..n {
            let kp = i * p;
            let parent = model.parents[i];
            for gm in 0..s {
                let mut v = self.yv[i * s + gm];
                if let Some(par) = parent {
                    let pp = par * p;
                    for r in 0..p {
                        v += self.x[(i * p + r) * s + gm].dot(&self.dv[pp + r]);
                    }
                    for nu in 0..s {
                        v += self.y[(i * s + nu) * s + gm].dot(&self.eta[pp + nu + 1]);
                    }
                }
                self.dq[gm] = v;
                x[gm * n + i] = v;
            }
            for a in 0..p {
                let (eta_par, dv_par) = match parent {
                    Some(par) => (self.eta[par * p + a], self.dv[par * p + a]),
                    None => (V6::zeros(), V6::zeros()),
                };
                let mut rate_dq = 0.0;
                for gm in 1..=s {
                    rate_dq += sc.b(a, gm) * self.dq[gm - 1];
                }
                let mut dv = dv_par + self.col[kp + a] * (rate_dq * inv_dt);
                if a >= 1 {
                    dv += self.rate[kp + a] * self.dq[a - 1];
                    self.eta[kp + a] = eta_par + self.col[kp + a] * self.dq[a - 1];
                } else {
                    self.eta[kp] = V6::zeros();
                }
                self.dv[kp + a] = dv;
            }
        }
    }
}
