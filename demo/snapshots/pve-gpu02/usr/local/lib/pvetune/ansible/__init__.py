# pvetune runtime library namespace (installed by fix.yml; rollback.yml removes it)
