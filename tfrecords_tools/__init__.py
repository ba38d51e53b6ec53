"""Turning learning-to-rank files into ELWC TFRecords: streaming LETOR, TREC and ELWC
input with validation, dataset layouts, click simulation, normalisation fitting, the ELWC
writer and synthetic generators."""
