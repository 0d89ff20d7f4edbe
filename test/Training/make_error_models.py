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
# an op without a gradient: a float Mod
two=numpy_helper.from_array(np.full((1,),2,np.float32),"two")
save("float_mod",[helper.make_node("MatMul",["x","w"],["h"],name="mm"),helper.make_node("Mod",["h","two"],["y"],name="mod1",fmod=1)],[f("x",[2,4])],[f("y",[2,3])],[w,two])
# batch norm: running statistics computed, one value per channel
bn=[numpy_helper.from_array(np.ones(2,np.float32),n) for n in ("s","b","m","v")]
save("bn_computed_mean",[helper.make_node("Neg",["m"],["nm"],name="neg"),helper.make_node("BatchNormalization",["x","s","b","nm","v"],["y"],name="bn1")],[f("x",[2,2,3,3])],[f("y",[2,2,3,3])],bn)
save("bn_one_value",[helper.make_node("BatchNormalization",["x","s","b","m","v"],["y"],name="bn1")],[f("x",[1,2,1,1])],[f("y",[1,2,1,1])],bn)
ints=lambda n,v: numpy_helper.from_array(np.array(v,np.int64),n)
# scalar output for cross-entropy
save("scalar_out",[helper.make_node("MatMul",["x","v"],["y"],name="dot")],[f("x",[4])],[f("y",[])],[numpy_helper.from_array(np.ones(4,np.float32),"v")])
# a model with an input named labels
save("labels_input",[helper.make_node("MatMul",["labels","w"],["y"],name="mm")],[f("labels",[2,4])],[f("y",[2,3])],[w])
np.save(os.path.join(out,"x.npy"),np.ones((2,4),np.float32))
np.save(os.path.join(out,"labels_f32.npy"),np.ones((2,3),np.float32))
np.save(os.path.join(out,"labels_bad.npy"),np.array([0,7],np.int64))
np.save(os.path.join(out,"labels_ok.npy"),np.array([0,2],np.int64))
# --data folders for the two_outputs plan (batch 2): whole batches, a
# partial batch, files that disagree, a wrong sample shape, no labels.
def data(name, **arrays):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    for k, v in arrays.items():
        np.save(os.path.join(out, name, k + ".npy"), v)
x6 = np.ones((6, 4), np.float32)
data("data_ok", x=x6, labels=np.array([0, 1, 2, 0, 1, 2], np.int64))
data("data_partial", x=x6[:5], labels=np.zeros(5, np.int64))
data("data_mismatch", x=x6, labels=np.zeros(4, np.int64))
data("data_shape", x=np.ones((6, 5), np.float32), labels=np.zeros(6, np.int64))
data("data_nolabels", x=x6)
# --source-model files that are not the plan's model: another initializer
# name, and the same name with another shape.
save("other_names",[helper.make_node("MatMul",["x","q"],["y"],name="mm")],[f("x",[2,4])],[f("y",[2,3])],[numpy_helper.from_array(np.ones((4,3),np.float32),"q")])
save("other_shape",[helper.make_node("MatMul",["x","w"],["y"],name="mm")],[f("x",[2,4])],[f("y",[2,4])],[numpy_helper.from_array(np.ones((4,4),np.float32),"w")])
# a loss over a sum across the batch: replicas cannot split it
save("batch_mix",[helper.make_node("MatMul",["x","w"],["h"],name="mm"),helper.make_node("ReduceSum",["h","ax0"],["y"],name="sum0",keepdims=1)],[f("x",[2,4])],[f("y",[1,3])],[w,ints("ax0",[0])])
# batch norm over a batch of 4 (gradient accumulation cannot keep its
# running statistics yet)
save("bn_batch4",[helper.make_node("BatchNormalization",["x","s","b","m","v"],["y"],name="bn1")],[f("x",[4,2,3,3])],[f("y",[4,2,3,3])],bn)
