-- The read-only sandbox, run last in analysis.connect (see analysis.replay.sandbox.lock_down for why each line).
-- Filled with allowed (the quoted folders a query may read: the store's tables and the spill folder that
-- new_connection.sql set).
-- Order matters: lock_configuration last, so nothing after it can be changed.
SET allowed_directories = [$allowed];
SET enable_external_access = false;
SET autoinstall_known_extensions = false;
SET autoload_known_extensions = false;
SET allow_community_extensions = false;
SET allow_persistent_secrets = false;
SET python_enable_replacements = false;
SET lock_configuration = true;
