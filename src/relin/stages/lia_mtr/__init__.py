"""lia_mtr stages."""
