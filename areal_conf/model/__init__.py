"""Models and GPUs: known GPUs from their data sheets, model shapes, known models as data,
the Hugging Face cache.
"""
