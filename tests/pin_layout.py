"""The one place that maps arrays between vidyn's and Pinocchio's layouts.

The layouts are identical joint by joint (DESIGN.md "Conventions") with one exception: a URDF
``continuous`` joint is one angle θ in vidyn (nq = 1) and (cos θ, sin θ) in Pinocchio (nq = 2).
The joint *order* may also differ for models built programmatically (vidyn's builder renumbers
bodies depth-first, Pinocchio keeps insertion order), so everything is matched by joint name.
Velocity-like vectors (v, a, τ) only need the block permutation; matrices (M, M⁻¹, Jacobians)
permute their v axes the same way.
"""

from __future__ import annotations

import numpy as np


class ConfigurationMap:
    """Maps q, v-like vectors and (…, nv) matrices between a vidyn and a Pinocchio model.

    Built from the two models' joint lists only: vidyn's ``joint_names``/``idx_q``/``idx_v``
    and Pinocchio's ``names``/``joints`` (joint 0, the universe, is skipped).
    """

    def __init__(self, vd_model, pin_model):
        vd_names = list(vd_model.joint_names)
        pin_names = list(pin_model.names)[1:]
        if sorted(vd_names) != sorted(pin_names):
            raise AssertionError(f"joint names differ: only vidyn {sorted(set(vd_names) - set(pin_names))}, only pin {sorted(set(pin_names) - set(vd_names))}")
        self.nq_vd, self.nv_vd = vd_model.nq, vd_model.nv
        self.nq_pin, self.nv_pin = pin_model.nq, pin_model.nv
        vd_iq = [int(i) for i in vd_model.idx_q] + [vd_model.nq]
        vd_iv = [int(i) for i in vd_model.idx_v] + [vd_model.nv]
        vd_pos = {name: k for k, name in enumerate(vd_names)}
        #: per Pinocchio joint (1..njoints-1): (vidyn body index, vd q slice, pin q slice,
        #: vd v slice, pin v slice, is_continuous)
        self.blocks = []
        for pj, name in enumerate(pin_names, start=1):
            k = vd_pos[name]
            jm = pin_model.joints[pj]
            sq_vd, sv_vd = slice(vd_iq[k], vd_iq[k + 1]), slice(vd_iv[k], vd_iv[k + 1])
            sq_pin, sv_pin = slice(jm.idx_q, jm.idx_q + jm.nq), slice(jm.idx_v, jm.idx_v + jm.nv)
            nq_vd, nv_vd = sq_vd.stop - sq_vd.start, sv_vd.stop - sv_vd.start
            if nv_vd != jm.nv:
                raise AssertionError(f"joint {name!r}: nv {nv_vd} (vidyn) != {jm.nv} (pin)")
            continuous = nq_vd == 1 and jm.nq == 2 and jm.nv == 1
            if nq_vd != jm.nq and not continuous:
                raise AssertionError(f"joint {name!r}: nq {nq_vd} (vidyn) != {jm.nq} (pin, {jm.shortname()})")
            self.blocks.append((k, sq_vd, sq_pin, sv_vd, sv_pin, continuous))
        #: vidyn body index of each Pinocchio joint 1..njoints-1 (pin joint j ↔ vidyn body[j-1])
        self.vd_body_of_pin_joint = [b[0] for b in self.blocks]
        self.v_perm = np.empty(self.nv_vd, dtype=int)  # v_pin = v_vd[v_perm]
        for _, _, _, sv_vd, sv_pin, _ in self.blocks:
            self.v_perm[sv_pin] = np.arange(sv_vd.start, sv_vd.stop)
        self.n_continuous = sum(b[5] for b in self.blocks)

    # configurations -----------------------------------------------------------------
    def q_to_pin(self, q_vd) -> np.ndarray:
        q_vd = np.asarray(q_vd, dtype=float)
        assert q_vd.shape == (self.nq_vd,), q_vd.shape
        out = np.empty(self.nq_pin)
        for _, sq_vd, sq_pin, _, _, cont in self.blocks:
            if cont:
                th = q_vd[sq_vd][0]
                out[sq_pin] = [np.cos(th), np.sin(th)]
            else:
                out[sq_pin] = q_vd[sq_vd]
        return out

    def q_to_vidyn(self, q_pin) -> np.ndarray:
        q_pin = np.asarray(q_pin, dtype=float)
        assert q_pin.shape == (self.nq_pin,), q_pin.shape
        out = np.empty(self.nq_vd)
        for _, sq_vd, sq_pin, _, _, cont in self.blocks:
            if cont:
                c, s = q_pin[sq_pin]
                out[sq_vd] = [np.arctan2(s, c)]
            else:
                out[sq_vd] = q_pin[sq_pin]
        return out

    # tangent vectors and matrices ---------------------------------------------------------
    def v_to_pin(self, v_vd) -> np.ndarray:
        return np.asarray(v_vd, dtype=float)[..., self.v_perm]

    def v_to_vidyn(self, v_pin) -> np.ndarray:
        v_pin = np.asarray(v_pin, dtype=float)
        out = np.empty_like(v_pin)
        out[..., self.v_perm] = v_pin
        return out

    def matrix_to_vidyn(self, m_pin) -> np.ndarray:
        """(nv, nv) matrix in Pinocchio's v order → vidyn's order (both axes)."""
        m = self.v_to_vidyn(np.asarray(m_pin, dtype=float))  # columns
        return self.v_to_vidyn(m.T).T  # rows
