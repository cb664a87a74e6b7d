"""The Beam pipeline a TFX Beam stage makes from its options, built without running the stage."""

from tfx.dsl.components.base import base_beam_executor


class DataStage(base_beam_executor.BaseBeamExecutor):
    """A Beam stage's executor: its pipeline is made, it never runs."""

    def Do(self, input_dict, output_dict, exec_properties):
        raise AssertionError("not run here")


def stage_pipeline(args):
    """The Beam pipeline a StatisticsGen executor makes with these Beam options."""
    from tfx.proto.orchestration import pipeline_pb2
    node = pipeline_pb2.PipelineNode()
    node.node_info.id = "StatisticsGen"        # TFX's executor classes are all `Executor`
    return DataStage(DataStage.Context(beam_pipeline_args=args, pipeline_node=node)
                     )._make_beam_pipeline()
