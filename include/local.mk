# Public extension header (installed).
