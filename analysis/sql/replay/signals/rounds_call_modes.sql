-- The writer's and critic's call mode of every stored round: what analysis.replay.views.has_batch_calls reads when
-- the stored signals lack the mode columns.
SELECT writer_mode, critic_mode FROM round_parts
