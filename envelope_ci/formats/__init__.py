"""Report formats: one module per format on the ``base.ReportFormat`` seam, listed in ``registry``."""
