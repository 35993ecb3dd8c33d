"""Evidence media: admission checks on references, and reading photos and video frames for the model.

(Being written: see the helper brief. Interface below is the contract.)
"""
