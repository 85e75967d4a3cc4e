"""A composed config read once into typed objects; the one place that touches OmegaConf's nodes."""
