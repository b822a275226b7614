"""What people see: the live snapshot, the rich dashboard, plain lines and the end-of-run report."""
