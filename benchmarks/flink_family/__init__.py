"""barriersim's family of Flink jobs: one description per configuration, run by Flink (``runner``) and by barriersim
(``converter``, ``compare``), generated from one seed (``generator``); docs/fidelity-family.md says why and how."""
