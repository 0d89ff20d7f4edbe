"""Small models for test/Training/train-errors.test: each one a way training
can be asked for what it cannot do."""
import numpy as np, onnx, sys, os
from onnx import helper, numpy_helper, TensorProto
out=sys.argv[1]; os.makedirs(out, exist_ok=True)
def save(name, nodes, inputs, outputs, inits):
    g=helper.make_graph(nodes,name,inputs,outputs,inits)
    onnx.save(helper.make_model(g,opset_imports=[helper.make_opsetid("",13)]),os.path.join(out,name+".onnx"))
f=lambda n,s: helper.make_tensor_value_info(n,TensorProto.FLOAT,s)
w=numpy_helper.from_array(np.ones((4,3),np.float32),"w")
# no float parameters: relu only
save("no_params",[helper.make_node("Relu",["x"],["y"],name="relu")],[f("x",[2,4])],[f("y",[2,4])],[])
# two outputs
save("two_outputs",[helper.make_node("MatMul",["x","w"],["y"],name="mm"),helper.make_node("Relu",["y"],["z"],name="r")],[f("x",[2,4])],[f("y",[2,3]),f("z",[2,3])],[w])
# an op without a gradient: Conv
cw=numpy_helper.from_array(np.ones((2,1,3,3),np.float32),"cw")
save("conv",[helper.make_node("Conv",["x","cw"],["y"],name="conv1")],[f("x",[1,1,5,5])],[f("y",[1,2,3,3])],[cw])
# scalar output for cross-entropy
save("scalar_out",[helper.make_node("MatMul",["x","v"],["y"],name="dot")],[f("x",[4])],[f("y",[])],[numpy_helper.from_array(np.ones(4,np.float32),"v")])
# a model with an input named labels
save("labels_input",[helper.make_node("MatMul",["labels","w"],["y"],name="mm")],[f("labels",[2,4])],[f("y",[2,3])],[w])
np.save(os.path.join(out,"x.npy"),np.ones((2,4),np.float32))
np.save(os.path.join(out,"labels_f32.npy"),np.ones((2,3),np.float32))
np.save(os.path.join(out,"labels_bad.npy"),np.array([0,7],np.int64))
