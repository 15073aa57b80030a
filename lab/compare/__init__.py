"""`helios-exporter compare`: the admission gate over two arms' evidence (admission.py) and what
it prints (text.py); the lanes and repetitions it matches (lanes.py, repetitions.py,
matched.py), the phases it derives again from the raw captures (rederive.py), the inputs each
gate declares (inputs.py), the gates (gates.py, strict.py, semantic.py) and their words
(verdicts.py)."""
