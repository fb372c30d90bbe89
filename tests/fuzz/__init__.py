"""Coverage-free property fuzzing of every parser, seeded from the real test data (see README.md here)."""
