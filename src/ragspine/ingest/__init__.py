"""Turning files into documents: discovery, decoding, metadata."""
