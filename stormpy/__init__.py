"""stormpy: prepackaged-response packet processing with a C fast path."""
__version__ = "0.1.0"

__all__ = ["__version__"]
