"""GPU binaries read from the files themselves: fatbins in ELF files (which GPUs a library can run on)
and CUDA GPU core dumps (.nvcudmp). Pure Python; ../shared/reference/formats.md Q6-Q8 has the layouts."""
