"""Evidence: Ed25519/DSSE signing, result bundles, offline verification."""
