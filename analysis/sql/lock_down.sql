-- The read-only sandbox, run last in analysis.connect (see analysis.sandbox.lock_down for why each line).
-- Filled with spill (the quoted spill folder) and allowed (the quoted folders a query may read).
-- Order matters: lock_configuration last, so nothing after it can be changed.
SET temp_directory = $spill;
SET allowed_directories = [$allowed];
SET enable_external_access = false;
SET autoinstall_known_extensions = false;
SET autoload_known_extensions = false;
SET allow_community_extensions = false;
SET allow_persistent_secrets = false;
SET python_enable_replacements = false;
SET lock_configuration = true;
