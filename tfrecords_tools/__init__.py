"""Turning learning-to-rank files (LETOR, TREC, ELWC, TFDS, synthetic) into ELWC TFRecords;
import from the modules (``tfrecords_tools.convert``, ...)."""
