"""The two-beta study (``python -m experiments.two_beta``): does Stage 1's ``beta1`` change what
A*-PO
learns on a language model, or only its gradient noise, at the paper's ``beta2 = 1e-3``?"""
