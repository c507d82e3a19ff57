"""skewlab engine: groupings (routing math), the controller, and the local and Spark runtimes."""

__version__ = "0.1.0"
