"""The refresh study (``python -m experiments.refresh``): does a moving reference (A*-PO's
``refresh_every_steps``) let A*-PO climb past the fixed reference's pass@k on the v_ref ladder?"""
