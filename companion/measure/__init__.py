"""Layer 3, measurements: cost, recall, keyword explanations, poisoning, the byte scan and forgetting. May import any
lower layer; nothing below imports it."""
