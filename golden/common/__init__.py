"""What the golden models of every paper share: argument checks (:mod:`.checks`) and the
beat-level adapter type with its stimulus helpers (:mod:`.beats`)."""
