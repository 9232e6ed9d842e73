-- The spill folder new_connection.sql set (analysis.replay.sandbox.lock_down allows it).
SELECT current_setting('temp_directory')
