"""Distillation (DIRAS section 3): a teacher's pointwise answers as chat examples for a student model, and the
LoRA fine-tuning that teaches them. Plain Python: nothing here knows Django."""
