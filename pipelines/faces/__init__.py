"""What users see: the command line, terminal views, the HTML report and the demo."""
