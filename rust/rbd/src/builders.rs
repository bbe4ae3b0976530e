//! Built-in model builders (in progress).
