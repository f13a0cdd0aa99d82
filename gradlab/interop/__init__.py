"""Small bridges to other libraries' objects (imported lazily: each needs its library)."""
