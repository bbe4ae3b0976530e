//! URDF import (in progress).
